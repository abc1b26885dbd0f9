package validate

import (
	"context"
	"testing"

	"github.com/google/cel-go/cel"
)

// celPeerRules is the peer of the shipped policies in Kubernetes' own
// admission language, as a ValidatingAdmissionPolicy would hold them: the
// same mount-path, disk-claim and shared-memory verdicts over the same
// input document, without the per-violation messages the Rego rules build.
const celPeerRules = `
(!has(input.object.metadata.annotations) || !('virtstation.io/shared-memory' in input.object.metadata.annotations)) &&
input.dataDisks.all(d, !has(d.mountPath) || d.mountPath == '' || (
  size(d.mountPath) <= 255 &&
  d.mountPath.matches('^(?:/[A-Za-z0-9_-][A-Za-z0-9._-]*)+$') &&
  !d.mountPath.matches('^/(?:bin|boot|dev|etc|lib[^/]*|proc|root|run|sbin|sys|tmp|usr|var)$|^/(?:boot|dev|etc|proc|run|sys|usr)/') &&
  d.mountPath != '/dev/shm' &&
  input.dataDisks.exists_one(e, has(e.mountPath) && e.mountPath == d.mountPath))) &&
input.dataDisks.all(d, d.name in input.disks && input.disks[d.name].exists && input.disks[d.name].labelled && (
  (d.type == 'cdrom' || d.readOnly)
    ? (input.disks[d.name].claimedBy == '' || input.disks[d.name].claimedBy == input.namespace + '/' + input.name || !input.disks[d.name].claimLive)
    : ((input.disks[d.name].claimedBy == '' || input.disks[d.name].claimedBy == input.namespace + '/' + input.name || !input.disks[d.name].claimLive) &&
       size(input.disks[d.name].sharedBy) == 0 && size(input.disks[d.name].usedBy) == 0)))
`

func celPeer(tb testing.TB) cel.Program {
	tb.Helper()
	env, err := cel.NewEnv(cel.Variable("input", cel.DynType))
	if err != nil {
		tb.Fatal(err)
	}
	ast, iss := env.Compile(celPeerRules)
	if iss.Err() != nil {
		tb.Fatal(iss.Err())
	}
	prg, err := env.Program(ast)
	if err != nil {
		tb.Fatal(err)
	}
	return prg
}

// TestCELPeerAgrees keeps the peer honest: on the benchmark's input and on
// inputs each shipped rule denies, the CEL peer reaches the same verdict as
// the Rego policies.
func TestCELPeerAgrees(t *testing.T) {
	e, prg := mustShippedEngine(t), celPeer(t)
	inputs := map[string]map[string]any{"realistic": realisticInput(t)}
	for name, edit := range map[string]func(map[string]any){
		"mount under /etc": func(in map[string]any) {
			in["dataDisks"].([]any)[0].(map[string]any)["mountPath"] = "/etc/x"
		},
		"shared memory": func(in map[string]any) {
			in["object"].(map[string]any)["metadata"].(map[string]any)["annotations"].(map[string]any)["virtstation.io/shared-memory"] = "1Gi"
		},
		"disk held by another VM": func(in map[string]any) {
			st := in["disks"].(map[string]any)["heidi-home"].(map[string]any)
			st["claimedBy"], st["claimLive"] = "workstations/other", true
		},
	} {
		in := realisticInput(t)
		edit(in)
		inputs[name] = in
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			d, err := e.Evaluate(context.Background(), in)
			if err != nil {
				t.Fatal(err)
			}
			out, _, err := prg.Eval(map[string]any{"input": in})
			if err != nil {
				t.Fatal(err)
			}
			if allowed := out.Value().(bool); allowed != (len(d.Deny) == 0) {
				t.Fatalf("CEL peer allows=%v, Rego denies %v", allowed, d.Deny)
			}
		})
	}
}

// BenchmarkEvaluateVsCEL evaluates the shipped Rego policies and their CEL
// peer on the same realistic input, side by side in one run. The CEL figure
// is a verdict only; Rego also builds each violation's field and message.
func BenchmarkEvaluateVsCEL(b *testing.B) {
	in := realisticInput(b)
	b.Run("rego", func(b *testing.B) {
		e := mustShippedEngine(b)
		ctx := context.Background()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := e.Evaluate(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cel-peer", func(b *testing.B) {
		prg := celPeer(b)
		act := map[string]any{"input": in}
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := prg.Eval(act); err != nil {
				b.Fatal(err)
			}
		}
	})
}
