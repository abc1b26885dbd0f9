package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/virtstation/virtstation/api"
)

// shippedEngine is one engine with the shipped policies, shared by tests
// that only evaluate.
var shippedEngine = sync.OnceValues(func() (*Engine, error) {
	e := NewEngine(0)
	_, err := e.Load(context.Background(), ShippedModules())
	return e, err
})

func mustShippedEngine(t testing.TB) *Engine {
	t.Helper()
	e, err := shippedEngine()
	if err != nil {
		t.Fatalf("load shipped policies: %v", err)
	}
	return e
}

// vmJSON is a managed VM ns/vm with the annotations.
func vmJSON(t testing.TB, annotations map[string]string) []byte {
	t.Helper()
	b, err := json.Marshal(map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "vm", "namespace": "ns", "labels": map[string]string{api.LabelManaged: api.LabelTrue}, "annotations": annotations},
		"spec":     map[string]any{"runStrategy": "Halted"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// free is a labelled PVC nobody uses.
var free = DiskState{Exists: true, Labelled: true, Kind: "PersistentVolumeClaim"}

func withState(s DiskState, f func(*DiskState)) DiskState {
	f(&s)
	return s
}

// hit is the part of a violation the rule tables compare.
type hit struct{ ID, Field string }

func hits(vs []Violation) []hit {
	out := make([]hit, 0, len(vs))
	for _, v := range vs {
		out = append(out, hit{v.ID, v.Field})
	}
	sort.Slice(out, func(i, j int) bool { return fmt.Sprint(out[i]) < fmt.Sprint(out[j]) })
	return slices.Compact(out)
}

const (
	mount0 = "metadata.annotations[virtstation.io/data-disks][0].mountPath"
	mount1 = "metadata.annotations[virtstation.io/data-disks][1].mountPath"
	name0  = "metadata.annotations[virtstation.io/data-disks][0].name"
	name1  = "metadata.annotations[virtstation.io/data-disks][1].name"
	shmAnn = "metadata.annotations[virtstation.io/shared-memory]"
)

// TestShippedRules drives every shipped rule through Engine.Evaluate: each
// bad VM gets the expected violations (and each message names the rule and
// a fix), each fixed one none.
func TestShippedRules(t *testing.T) {
	e := mustShippedEngine(t)
	disks := map[string]DiskState{"data": free, "logs": free}
	cases := map[string]struct {
		annotations map[string]string
		disks       map[string]DiskState
		want        []hit
		wantText    []string
	}{
		"no annotations": {},
		"good data disks": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/srv/data,logs:/var/log/app"},
		},
		"mount-path unclean": {
			annotations: map[string]string{api.AnnotationDataDisks: `[{"name":"data","mountPath":"/srv"},{"name":"logs","mountPath":"/srv/"}]`},
			want:        []hit{{"mount-path", mount1}},
			wantText:    []string{`mount path "/srv/" is not clean`},
		},
		"mount-path system directory": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/etc"},
			want:        []hit{{"mount-path", mount0}},
			wantText:    []string{"system directory /etc", "(rule: mount-path; fix: "},
		},
		"mount-path /lib64": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/srv,logs:/lib64"},
			want:        []hit{{"mount-path", mount1}},
		},
		"mount-path below /usr": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/usr/local/data"},
			want:        []hit{{"mount-path", mount0}},
			wantText:    []string{"inside the system directory /usr"},
		},
		"mount-path unsafe characters": {
			annotations: map[string]string{api.AnnotationDataDisks: `[{"name":"data","mountPath":"/srv/$(reboot)"}]`},
			want:        []hit{{"mount-path", mount0}},
		},
		"mount-path too long": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/" + strings.Repeat("x", 255)},
			want:        []hit{{"mount-path", mount0}},
			wantText:    []string{"256 characters long"},
		},
		"disk-claim missing disk": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/srv/data,gone:/srv/gone"},
			want:        []hit{{"disk-claim", name1}},
			wantText:    []string{`data disk "gone" does not exist in namespace "ns"`, "labelled virtstation.io/data-disk=true"},
		},
		"disk-claim unlabelled": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/srv/data"},
			disks:       map[string]DiskState{"data": withState(free, func(s *DiskState) { s.Labelled = false })},
			want:        []hit{{"disk-claim", name0}},
			wantText:    []string{"not labelled as a data disk", "fix: label it virtstation.io/data-disk=true"},
		},
		"disk-claim claimed by live VM": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/srv/data"},
			disks:       map[string]DiskState{"data": withState(free, func(s *DiskState) { s.ClaimedBy, s.ClaimLive = "ns/winner", true })},
			want:        []hit{{"disk-claim", name0}},
			wantText:    []string{"attached writable to VM ns/winner"},
		},
		"disk-claim cdrom vs live writer": {
			annotations: map[string]string{api.AnnotationDataDisks: `[{"name":"data","type":"cdrom"}]`},
			disks:       map[string]DiskState{"data": withState(free, func(s *DiskState) { s.ClaimedBy, s.ClaimLive = "ns/winner", true })},
			want:        []hit{{"disk-claim", name0}},
			wantText:    []string{"ns/winner"},
		},
		"disk-claim stale claim": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/srv/data"},
			disks:       map[string]DiskState{"data": withState(free, func(s *DiskState) { s.ClaimedBy = "ns/gone" })},
		},
		"disk-claim own claim": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/srv/data"},
			disks:       map[string]DiskState{"data": withState(free, func(s *DiskState) { s.ClaimedBy, s.ClaimLive = "ns/vm", true })},
		},
		"disk-claim writer vs readers": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/srv/data"},
			disks:       map[string]DiskState{"data": withState(free, func(s *DiskState) { s.SharedBy = []string{"ns/reader"} })},
			want:        []hit{{"disk-claim", name0}},
			wantText:    []string{"attached read-only to VM ns/reader"},
		},
		"disk-claim readers share": {
			annotations: map[string]string{api.AnnotationDataDisks: `[{"name":"data","mountPath":"/srv/data","readOnly":true}]`},
			disks:       map[string]DiskState{"data": withState(free, func(s *DiskState) { s.SharedBy = []string{"ns/reader"} })},
		},
		"disk-claim used by a VMI": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/srv/data"},
			disks:       map[string]DiskState{"data": withState(free, func(s *DiskState) { s.UsedBy = []string{"ns/legacy"} })},
			want:        []hit{{"disk-claim", name0}},
			wantText:    []string{"in use by the running VM ns/legacy"},
		},
		"shared-memory annotation": {
			annotations: map[string]string{api.AnnotationSharedMemory: "1Gi"},
			want:        []hit{{"shared-memory", shmAnn}},
			wantText:    []string{"VMs cannot use shared memory", "(rule: shared-memory; fix: remove the annotation"},
		},
		"shared-memory /dev/shm mount": {
			annotations: map[string]string{api.AnnotationDataDisks: "data:/dev/shm"},
			want:        []hit{{"mount-path", mount0}, {"shared-memory", mount0}},
			wantText:    []string{"VMs cannot use shared memory"},
		},
		"unparseable annotation is left to the mutating webhook": {
			annotations: map[string]string{api.AnnotationDataDisks: "[not json"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			d := disks
			if tc.disks != nil {
				d = tc.disks
			}
			input, err := BuildInput("CREATE", "ns", "vm", vmJSON(t, tc.annotations), nil, nil, d)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.Evaluate(context.Background(), input)
			if err != nil {
				t.Fatal(err)
			}
			if g := hits(got.Deny); !slices.Equal(g, tc.want) && (len(g) > 0 || len(tc.want) > 0) {
				t.Errorf("deny = %v, want %v\n%v", g, tc.want, got.Deny)
			}
			if len(got.Warn) > 0 {
				t.Errorf("warn = %v, want none", got.Warn)
			}
			for _, v := range got.Deny {
				if !strings.Contains(v.Message, "(rule: "+v.ID+"; fix: ") {
					t.Errorf("message %q does not name the rule and the fix", v.Message)
				}
			}
			all := fmt.Sprint(got.Deny)
			for _, w := range tc.wantText {
				if !strings.Contains(all, w) {
					t.Errorf("violations %s lack %q", all, w)
				}
			}
			if got.Revision != e.Revision() {
				t.Errorf("decision revision %q, engine %q", got.Revision, e.Revision())
			}
		})
	}
}

// operatorMaxDisks is an operator policy: at most 4 data disks, with tests.
var operatorMaxDisks = []Module{{Name: "max_disks.rego", Source: `package virtstation.rules.max_disks

deny contains {"id": "max-disks", "field": "metadata.annotations[virtstation.io/data-disks]", "message": sprintf("%d data disks, more than 4 (rule: max-disks; fix: attach at most 4)", [count(input.dataDisks)])} if {
	count(input.dataDisks) > 4
}

warn contains {"id": "max-disks", "field": "metadata.annotations[virtstation.io/data-disks]", "message": "4 data disks is the limit (rule: max-disks; fix: none needed)"} if {
	count(input.dataDisks) == 4
}
`}, {Name: "max_disks_test.rego", Source: `package virtstation.rules.max_disks

test_five_denied if {
	count(deny) == 1 with input as {"dataDisks": [1, 2, 3, 4, 5]}
}

test_four_warned if {
	count(deny) == 0 with input as {"dataDisks": [1, 2, 3, 4]}
	count(warn) == 1 with input as {"dataDisks": [1, 2, 3, 4]}
}
`}}

func TestOperatorPolicy(t *testing.T) {
	e := NewEngine(time.Second)
	rev, err := e.Load(context.Background(), Merge(ShippedModules(), operatorMaxDisks))
	if err != nil {
		t.Fatal(err)
	}
	if rev == mustShippedEngine(t).Revision() || rev != e.Revision() {
		t.Errorf("revision %q: want a new one, reported by Revision (%q)", rev, e.Revision())
	}
	states := map[string]DiskState{}
	var names []string
	for i := range 5 {
		n := fmt.Sprintf("d%d", i)
		states[n] = free
		names = append(names, fmt.Sprintf("%s:/srv/%s", n, n))
	}
	for n, want := range map[int]Decision{
		5: {Deny: []Violation{{ID: "max-disks", Field: "metadata.annotations[virtstation.io/data-disks]", Message: "5 data disks, more than 4 (rule: max-disks; fix: attach at most 4)"}}},
		4: {Warn: []Violation{{ID: "max-disks", Field: "metadata.annotations[virtstation.io/data-disks]", Message: "4 data disks is the limit (rule: max-disks; fix: none needed)"}}},
		3: {},
	} {
		in, err := BuildInput("CREATE", "", "", vmJSON(t, map[string]string{api.AnnotationDataDisks: strings.Join(names[:n], ",")}), nil, nil, states)
		if err != nil {
			t.Fatal(err)
		}
		got, err := e.Evaluate(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got.Deny, got.Warn) != fmt.Sprint(want.Deny, want.Warn) {
			t.Errorf("%d disks: got deny %v warn %v, want deny %v warn %v", n, got.Deny, got.Warn, want.Deny, want.Warn)
		}
	}
}

func TestOperatorOverridesShippedModule(t *testing.T) {
	// An operator replaces mount_path.rego (and its tests) with a rule that
	// only forbids /etc.
	override := []Module{
		{Name: "mount_path.rego", Source: "package virtstation.rules.mount_path\n\ndeny contains {\"id\": \"mount-path\", \"field\": \"f\", \"message\": \"m\"} if {\n\tsome d in input.dataDisks\n\td.mountPath == \"/etc\"\n}\n"},
		{Name: "mount_path_test.rego", Source: "package virtstation.rules.mount_path\n\ntest_etc if count(deny) == 1 with input as {\"dataDisks\": [{\"mountPath\": \"/etc\"}]}\n"},
	}
	e := NewEngine(0)
	if _, err := e.Load(context.Background(), Merge(ShippedModules(), override)); err != nil {
		t.Fatal(err)
	}
	in, err := BuildInput("CREATE", "", "", vmJSON(t, map[string]string{api.AnnotationDataDisks: "data:/usr/x"}), nil, nil, map[string]DiskState{"data": free})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.Evaluate(context.Background(), in)
	if err != nil || len(d.Deny) != 0 {
		t.Errorf("overridden mount-path still denies /usr/x: %v %v", d.Deny, err)
	}
}

func TestCompileRejects(t *testing.T) {
	cases := map[string]struct {
		source string
		want   []string
	}{
		"parse error": {
			source: "package virtstation.rules.x\n\ndeny contains v if {\n\tv := \n}\n",
			want:   []string{"x.rego:5: rego_parse_error"},
		},
		"unsafe variable": {
			source: "package virtstation.rules.x\n\ndeny contains v if {\n\tv.id == \"x\"\n}\n",
			want:   []string{"x.rego:4: rego_unsafe_var_error: var v is unsafe"},
		},
		"undefined function": {
			source: "package virtstation.rules.x\n\ndeny contains v if {\n\tv := nosuch.fn(input.name)\n}\n",
			want:   []string{"x.rego:4: rego_type_error: undefined function nosuch.fn"},
		},
		"undefined local": {
			source: "package virtstation.rules.x\n\ndeny contains v if {\n\tv := undefined_rule\n}\n",
			want:   []string{"x.rego:4: rego_unsafe_var_error: var undefined_rule is unsafe"},
		},
		"strict: unused import": {
			source: "package virtstation.rules.x\n\nimport data.virtstation.rules.mount_path\n\ndeny contains 1 if input.x\n",
			want:   []string{"x.rego:3: rego_compile_error: import data.virtstation.rules.mount_path unused"},
		},
		"strict: unused local": {
			source: "package virtstation.rules.x\n\ndeny contains 1 if {\n\tunused := input.x\n\tinput.y\n}\n",
			want:   []string{"x.rego:4: rego_compile_error: assigned var unused unused"},
		},
		"http.send": {
			source: "package virtstation.rules.x\n\ndeny contains r.body if {\n\tr := http.send({\"method\": \"GET\", \"url\": \"https://example.com\"})\n}\n",
			want:   []string{"x.rego:4: rego_type_error: undefined function http.send", "are disabled in virtstation policies"},
		},
		"net.lookup_ip_addr": {
			source: "package virtstation.rules.x\n\ndeny contains a if {\n\tsome a in net.lookup_ip_addr(\"example.com\")\n}\n",
			want:   []string{"x.rego:4: rego_type_error: undefined function net.lookup_ip_addr", "disabled"},
		},
		"net.cidr_contains": {
			source: "package virtstation.rules.x\n\ndeny contains 1 if net.cidr_contains(\"10.0.0.0/8\", input.ip)\n",
			want:   []string{"x.rego:3: rego_type_error: undefined function net.cidr_contains"},
		},
		"opa.runtime": {
			source: "package virtstation.rules.x\n\ndeny contains opa.runtime().env.HOME if true\n",
			want:   []string{"x.rego:3: rego_type_error: undefined function opa.runtime"},
		},
		"rego v0 syntax": {
			source: "package virtstation.rules.x\n\ndeny[msg] {\n\tmsg := \"x\"\n}\n",
			want:   []string{"x.rego:3: rego_parse_error"},
		},
		"conflict with shipped rule": {
			source: "package virtstation\n\ndeny := 1\n",
			want:   []string{"rego_type_error: conflicting rules data.virtstation.deny"},
		},
		"empty": {
			source: "",
			want:   []string{"x.rego"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(Merge(ShippedModules(), []Module{{Name: "x.rego", Source: tc.source}}))
			if err == nil {
				t.Fatal("compiled")
			}
			var pe *PolicyError
			if !errors.As(err, &pe) || len(pe.Problems) == 0 {
				t.Fatalf("error %v (%T) is no *PolicyError with problems", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestCompileAllowsPureBuiltins(t *testing.T) {
	src := "package virtstation.rules.x\n\ndeny contains msg if {\n\tprint(input.name)\n\tregex.match(`^x`, input.name)\n\tmsg := sprintf(\"%s at %d\", [upper(input.name), time.now_ns()])\n}\n"
	if _, err := Compile([]Module{{Name: "x.rego", Source: src}}); err != nil {
		t.Fatal(err)
	}
}

func TestRunTests(t *testing.T) {
	if err := RunTests(context.Background(), ShippedModules()); err != nil {
		t.Fatalf("shipped tests: %v", err)
	}
	failing := Module{Name: "x_test.rego", Source: "package virtstation.rules.mount_path\n\ntest_passes if true\n\ntest_etc_allowed if {\n\tprint(\"checking /etc\")\n\tcount(deny) == 0 with input as {\"dataDisks\": [{\"mountPath\": \"/etc\"}]}\n}\n\ntest_errors if {\n\tx := 1 / 0\n\tx > 0\n}\n"}
	err := RunTests(context.Background(), Merge(ShippedModules(), []Module{failing}))
	var pe *PolicyError
	if !errors.As(err, &pe) {
		t.Fatalf("error %v, want a *PolicyError", err)
	}
	for _, w := range []string{
		"x_test.rego:5: test data.virtstation.rules.mount_path.test_etc_allowed failed",
		"x_test.rego:10: test data.virtstation.rules.mount_path.test_errors",
		"test_etc_allowed failed; printed: checking /etc",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q lacks %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "test_passes") {
		t.Errorf("error %q lists a passing test", err)
	}
	if got := pe.Files(); !slices.Equal(got, []string{"x_test.rego"}) {
		t.Errorf("Files() = %v", got)
	}
}

func TestRunTestsReportsCompileErrors(t *testing.T) {
	err := RunTests(context.Background(), []Module{{Name: "bad_test.rego", Source: "package p\n\ntest_x if http.send({})\n"}})
	if err == nil || !strings.Contains(err.Error(), "bad_test.rego:3: rego_type_error: undefined function http.send") {
		t.Fatalf("error %v", err)
	}
}

func TestLoadKeepsLastGoodSet(t *testing.T) {
	ctx := context.Background()
	e := NewEngine(0)
	if e.Ready() || e.Revision() != "" {
		t.Fatal("new engine is ready")
	}
	if _, err := e.Evaluate(ctx, map[string]any{}); !errors.Is(err, ErrNotReady) {
		t.Fatalf("Evaluate before Load: %v", err)
	}
	if e.ReadyCheck(nil) == nil {
		t.Fatal("ReadyCheck passes before Load")
	}
	good, err := e.Load(ctx, ShippedModules())
	if err != nil {
		t.Fatal(err)
	}
	if !e.Ready() || e.Revision() != good || e.ReadyCheck(nil) != nil {
		t.Fatalf("after Load: ready %v revision %q, want %q", e.Ready(), e.Revision(), good)
	}
	if good != Revision(ShippedModules()) {
		t.Errorf("Load returned %q, Revision says %q", good, Revision(ShippedModules()))
	}
	bad := map[string][]Module{
		"compile error":  Merge(ShippedModules(), []Module{{Name: "x.rego", Source: "package x\n\ny := http.send({})\n"}}),
		"failing test":   Merge(ShippedModules(), []Module{{Name: "x_test.rego", Source: "package x\n\ntest_fails if false\n"}}),
		"no aggregator":  Merge(ShippedModules(), []Module{{Name: "virtstation.rego", Source: "package virtstation\n\nwarn contains 1 if false\n"}, {Name: "virtstation_test.rego", Source: "package virtstation\n"}}),
		"no modules":     nil,
		"duplicate name": append(ShippedModules(), ShippedModules()[0]),
	}
	for name, modules := range bad {
		t.Run(name, func(t *testing.T) {
			rev, err := e.Load(ctx, modules)
			if err == nil {
				t.Fatalf("loaded %s", rev)
			}
			if e.Revision() != good || !e.Ready() {
				t.Errorf("revision %q after a failed load, want %q", e.Revision(), good)
			}
			in, err := BuildInput("CREATE", "", "", vmJSON(t, map[string]string{api.AnnotationSharedMemory: "x"}), nil, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := e.Evaluate(ctx, in); err != nil || len(d.Deny) != 1 {
				t.Errorf("the last good set does not decide: %v %v", d, err)
			}
		})
	}
	if e.Revision() != good {
		t.Errorf("revision %q", e.Revision())
	}
}

func TestEvaluateDeadline(t *testing.T) {
	slow := Module{Name: "slow.rego", Source: "package virtstation.rules.slow\n\ndeny contains \"never\" if {\n\tinput.slow\n\tsome i in numbers.range(1, 5000)\n\tsome j in numbers.range(1, 5000)\n\ti * j < 0\n}\n"}
	e := NewEngine(20 * time.Millisecond)
	if _, err := e.Load(context.Background(), Merge(ShippedModules(), []Module{slow})); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := e.Evaluate(context.Background(), map[string]any{"slow": true, "dataDisks": []any{}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want a deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("evaluation took %s after a 20ms deadline", d)
	}
}

func TestEvaluateReadsLooseViolations(t *testing.T) {
	loose := Module{Name: "loose.rego", Source: "package virtstation.rules.loose\n\ndeny contains \"plain message\" if input.name == \"x\"\n\ndeny contains {\"message\": \"no id\", \"field\": 3} if input.name == \"x\"\n"}
	e := NewEngine(0)
	if _, err := e.Load(context.Background(), Merge(ShippedModules(), []Module{loose})); err != nil {
		t.Fatal(err)
	}
	d, err := e.Evaluate(context.Background(), map[string]any{"name": "x", "dataDisks": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Violation{{ID: "policy", Message: "plain message"}, {ID: "policy", Field: "3", Message: "no id"}}
	if !slices.Equal(d.Deny, want) {
		t.Errorf("deny = %v, want %v", d.Deny, want)
	}
}

// TestEngineConcurrentSwap evaluates while sets are swapped (run with -race).
func TestEngineConcurrentSwap(t *testing.T) {
	ctx := context.Background()
	e := NewEngine(0)
	sets := [][]Module{ShippedModules(), Merge(ShippedModules(), operatorMaxDisks)}
	if _, err := e.Load(ctx, sets[0]); err != nil {
		t.Fatal(err)
	}
	in, err := BuildInput("CREATE", "", "", vmJSON(t, map[string]string{api.AnnotationSharedMemory: "x"}), nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				d, err := e.Evaluate(ctx, in)
				if err != nil || len(d.Deny) != 1 {
					t.Errorf("evaluate during swap: %v %v", d, err)
					return
				}
			}
		})
	}
	for i := range 4 {
		if _, err := e.Load(ctx, sets[i%2]); err != nil {
			t.Error(err)
		}
	}
	close(stop)
	wg.Wait()
}

func TestMerge(t *testing.T) {
	shipped := []Module{{Name: "b.rego", Source: "b"}, {Name: "a.rego", Source: "a"}}
	operator := []Module{{Name: "c.rego", Source: "c1"}, {Name: "a.rego", Source: "a2"}, {Name: "c.rego", Source: "c2"}}
	got := Merge(shipped, operator)
	want := []Module{{Name: "a.rego", Source: "a2"}, {Name: "b.rego", Source: "b"}, {Name: "c.rego", Source: "c2"}}
	if !slices.Equal(got, want) {
		t.Errorf("Merge = %v, want %v", got, want)
	}
	if Revision(got) != Revision([]Module{want[2], want[0], want[1]}) {
		t.Error("Revision depends on order")
	}
	if Revision(got) == Revision(shipped) || len(Revision(got)) != 12 {
		t.Errorf("Revision %q", Revision(got))
	}
	// Name and source boundaries matter.
	if Revision([]Module{{Name: "ab", Source: "c"}}) == Revision([]Module{{Name: "a", Source: "bc"}}) {
		t.Error("Revision ignores the name/source boundary")
	}
}

func TestShippedModules(t *testing.T) {
	var names []string
	for _, m := range ShippedModules() {
		names = append(names, m.Name)
		if strings.TrimSpace(m.Source) == "" {
			t.Errorf("%s is empty", m.Name)
		}
	}
	for _, rule := range []string{"mount_path", "disk_claim", "shared_memory", "virtstation"} {
		for _, f := range []string{rule + ".rego", rule + "_test.rego"} {
			if !slices.Contains(names, f) {
				t.Errorf("shipped modules %v lack %s", names, f)
			}
		}
	}
}

// realisticInput is testdata/vm.json with its three data disks free.
func realisticInput(tb testing.TB) map[string]any {
	tb.Helper()
	raw, err := os.ReadFile("testdata/vm.json")
	if err != nil {
		tb.Fatal(err)
	}
	user := map[string]any{"username": "heidi@example.com", "uid": "1234", "groups": []any{"researchers", "system:authenticated"}}
	in, err := BuildInput("UPDATE", "workstations", "station-heidi", raw, raw, user, map[string]DiskState{
		"heidi-home": {Exists: true, Labelled: true, Kind: "DataVolume", ClaimedBy: "workstations/station-heidi", ClaimLive: true},
		"datasets":   {Exists: true, Labelled: true, Kind: "PersistentVolumeClaim", SharedBy: []string{"workstations/station-ivan"}, UsedBy: []string{"workstations/station-ivan"}},
		"tools-iso":  {Exists: true, Labelled: true, Kind: "DataVolume", SharedBy: []string{"workstations/station-ivan"}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return in
}

func TestRealisticInputIsAdmitted(t *testing.T) {
	d, err := mustShippedEngine(t).Evaluate(context.Background(), realisticInput(t))
	if err != nil || len(d.Deny)+len(d.Warn) > 0 {
		t.Fatalf("testdata/vm.json: %v %v", d, err)
	}
}
