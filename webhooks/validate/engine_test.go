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
	"github.com/virtstation/virtstation/policy"
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

func hits(vs []policy.Violation) []hit {
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
	for n, want := range map[int]policy.Decision{
		5: {Deny: []policy.Violation{{ID: "max-disks", Field: "metadata.annotations[virtstation.io/data-disks]", Message: "5 data disks, more than 4 (rule: max-disks; fix: attach at most 4)"}}},
		4: {Warn: []policy.Violation{{ID: "max-disks", Field: "metadata.annotations[virtstation.io/data-disks]", Message: "4 data disks is the limit (rule: max-disks; fix: none needed)"}}},
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
