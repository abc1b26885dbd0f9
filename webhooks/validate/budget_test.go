package validate

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/virtstation/virtstation/policy"
)

// slowSource is a valid rule that takes seconds on any input: four million
// products, none of them negative.
const slowSource = `package virtstation.rules.slow

deny contains {"id": "slow", "field": "metadata", "message": "never"} if {
	some i in numbers.range(1, 2000)
	some j in numbers.range(1, 2000)
	i * j < 0
}
`

// slowOnAnnotationSource is fast on the samples but takes seconds on a VM
// annotated example.com/audit=deep.
const slowOnAnnotationSource = `package virtstation.rules.audit

deny contains {"id": "audit", "field": "metadata", "message": "never"} if {
	input.object.metadata.annotations["example.com/audit"] == "deep"
	some i in numbers.range(1, 2000)
	some j in numbers.range(1, 2000)
	i * j < 0
}
`

// slowHelperModules: the rule is in one module, the time in another's
// function.
var slowHelperModules = []Module{
	{Name: "caller.rego", Source: `package virtstation.rules.caller

import data.virtstation.lib.expensive

deny contains {"id": "caller", "field": "metadata", "message": "never"} if {
	expensive.negative_product(input.name)
}
`},
	{Name: "expensive.rego", Source: `package virtstation.lib.expensive

negative_product(_) if {
	some i in numbers.range(1, 2000)
	some j in numbers.range(1, 2000)
	i * j < 0
}
`},
}

// TestSamples: the embedded samples parse and do what their descriptions
// say under the shipped rules, each well inside the budget.
func TestSamples(t *testing.T) {
	e := mustShippedEngine(t)
	want := map[string][]string{
		"create-denied":      {"disk-claim", "mount-path", "shared-memory"},
		"create-plain":       nil,
		"create-workstation": nil,
		"update-workstation": nil,
	}
	got := Samples()
	if len(got) != len(want) {
		t.Fatalf("%d samples, want %d", len(got), len(want))
	}
	for _, s := range got {
		rules, ok := want[s.Name]
		if !ok {
			t.Errorf("unexpected sample %s", s.Name)
			continue
		}
		if s.Description == "" {
			t.Errorf("%s has no description", s.Name)
		}
		var d policy.Decision
		took := time.Hour
		for range 3 { // the fastest of three: the first one warms up
			start := time.Now()
			var err error
			if d, err = e.Evaluate(context.Background(), s.Input); err != nil {
				t.Fatalf("%s: %v", s.Name, err)
			}
			took = min(took, time.Since(start))
		}
		var ids []string
		for _, v := range d.Deny {
			if len(ids) == 0 || ids[len(ids)-1] != v.ID {
				ids = append(ids, v.ID)
			}
		}
		if strings.Join(ids, ",") != strings.Join(rules, ",") {
			t.Errorf("%s: denied by %v, want %v", s.Name, ids, rules)
		}
		if took > PolicyBudget/10 {
			t.Errorf("%s: the shipped set took %s, a tenth of the budget is %s", s.Name, took, PolicyBudget/10)
		}
		t.Logf("%s: %s", s.Name, took)
	}
}

func TestParseSampleRejects(t *testing.T) {
	cases := map[string]string{
		"not JSON":        `{`,
		"unknown field":   `{"operation": "CREATE", "object": {}, "extra": 1}`,
		"DELETE":          `{"operation": "DELETE", "object": {}}`,
		"object not JSON": `{"operation": "CREATE", "object": 3}`,
	}
	for name, src := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := parseSamples(fstest.MapFS{"samples/x.json": {Data: []byte(src)}}); err == nil {
				t.Error("parsed")
			}
		})
	}
}

// TestCheckBudget: a slow policy is refused naming the module the time
// went to (where the time is spent, not where the rule is), fast ones and
// the shipped set pass, and an evaluation error is a policy problem at its
// location.
func TestCheckBudget(t *testing.T) {
	cases := map[string]struct {
		operator   []Module
		wantModule string
		// wantLines are the first and last line of the slow loop.
		wantLines [2]int
		wantFile  string
	}{
		"shipped":               {},
		"fast operator":         {operator: operatorMaxDisks},
		"slow on its samples":   {operator: []Module{{Name: "slow.rego", Source: slowSource}}, wantModule: "slow.rego", wantLines: [2]int{4, 6}},
		"slow on an annotation": {operator: []Module{{Name: "audit.rego", Source: slowOnAnnotationSource}}},
		"slow in a helper":      {operator: slowHelperModules, wantModule: "expensive.rego", wantLines: [2]int{4, 6}},
		"conflict": {
			operator: []Module{{Name: "conflict.rego", Source: "package virtstation.rules.conflict\n\nx := 1\n\nx := 2 if input.operation\n\ndeny contains \"no\" if x == 3\n"}},
			wantFile: "conflict.rego",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			modules := Merge(ShippedModules(), tc.operator)
			compiler, err := Compile(modules)
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			err = checkBudget(context.Background(), compiler, modules, Samples(), PolicyBudget)
			if took := time.Since(start); took > budgetCheckTimeout {
				t.Errorf("took %s, the webhook allows %s", took, budgetCheckTimeout)
			}
			var be *BudgetError
			var pe *PolicyError
			switch {
			case tc.wantModule != "":
				if !errors.As(err, &be) {
					t.Fatalf("err = %v, want a budget error", err)
				}
				if be.Module != tc.wantModule || be.Line < tc.wantLines[0] || be.Line > tc.wantLines[1] || be.Budget != PolicyBudget || be.Sample == "" {
					t.Errorf("budget error %+v, want module %s lines %v", be, tc.wantModule, tc.wantLines)
				}
			case tc.wantFile != "":
				if !errors.As(err, &pe) || len(pe.Files()) != 1 || pe.Files()[0] != tc.wantFile {
					t.Fatalf("err = %v, want a policy error in %s", err, tc.wantFile)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestEvaluateDeadlineNamesModule: past its deadline an evaluation is a
// DeadlineError naming the module, its ConfigMap and the line, and its
// denial names the rule and the fix.
func TestEvaluateDeadlineNamesModule(t *testing.T) {
	cm := types.NamespacedName{Namespace: installNS, Name: "audit-policy"}
	e := NewEngine(50 * time.Millisecond)
	if _, err := e.Load(context.Background(), Merge(ShippedModules(), []Module{{Name: "audit.rego", Source: slowOnAnnotationSource, ConfigMap: cm}})); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Evaluate(context.Background(), Samples()[0].Input); err != nil {
		t.Fatalf("sample: %v", err)
	}
	start := time.Now()
	_, err := e.Evaluate(context.Background(), map[string]any{"object": map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{"example.com/audit": "deep"}}}})
	took := time.Since(start)
	var de *DeadlineError
	if !errors.As(err, &de) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a deadline error", err)
	}
	if de.Module != "audit.rego" || de.ConfigMap != cm || de.Line < 5 || de.Line > 7 || de.Deadline != 50*time.Millisecond {
		t.Errorf("deadline error %+v", de)
	}
	for _, w := range []string{"audit.rego", "ConfigMap virtstation-system/audit-policy", "50ms", "rule: policy-deadline", "fix:", "most of the time at line"} {
		if !strings.Contains(de.Denial(), w) {
			t.Errorf("denial %q lacks %q", de.Denial(), w)
		}
	}
	if max := 50*time.Millisecond + attributionTimeout + time.Second; took > max {
		t.Errorf("evaluation took %s, want under %s", took, max)
	}
	// A caller that gives up is not the policy's fault.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = e.Evaluate(ctx, map[string]any{"object": map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{"example.com/audit": "deep"}}}})
	if err == nil || errors.As(err, &de) {
		t.Errorf("cancelled by the caller: err = %v, want a plain error", err)
	}
}

// TestVMHandlerDeadline: an evaluation past its deadline is a 403 naming
// the module (never a 500), with an Event on the module's ConfigMap and
// the metric.
func TestVMHandlerDeadline(t *testing.T) {
	ctx := context.Background()
	cm := policyConfigMap("audit-policy", map[string]string{"audit.rego": slowOnAnnotationSource})
	ops, _ := OperatorModules([]corev1.ConfigMap{*cm})
	engine := NewEngine(50 * time.Millisecond)
	if _, err := engine.Load(ctx, Merge(ShippedModules(), ops)); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(handlerScheme(t)).WithObjects(cm).Build()
	f := &loaderFixture{reg: prometheus.NewRegistry()}
	m, err := NewMetrics(f.reg)
	if err != nil {
		t.Fatal(err)
	}
	events := &eventLog{}
	h := &VMHandler{
		Engine: engine, Modes: &atomic.Pointer[policy.Modes]{}, Client: c,
		Snapshots: Snapshotter{Cache: c, API: c, NoDataVolumes: true, Grace: time.Minute},
		Recorder:  events, Metrics: m,
	}
	if resp := h.Handle(ctx, vmRequest(t, "plain", nil, false)); !resp.Allowed {
		t.Fatalf("plain VM denied: %+v", resp.Result)
	}
	resp := h.Handle(ctx, vmRequest(t, "deep", map[string]string{"example.com/audit": "deep"}, false))
	if resp.Allowed || resp.Result.Code != http.StatusForbidden {
		t.Fatalf("response %+v, want a 403", resp.Result)
	}
	for _, w := range []string{"audit.rego", "ConfigMap virtstation-system/audit-policy", "rule: policy-deadline", "fix:"} {
		if !strings.Contains(resp.Result.Message, w) {
			t.Errorf("denial %q lacks %q", resp.Result.Message, w)
		}
	}
	got := events.take()
	if len(got) != 1 || got[0].Object != "audit-policy" || got[0].Reason != ReasonPolicyDeadlineExceeded || got[0].Type != "Warning" ||
		!strings.Contains(got[0].Note, "CREATE of VM ns/deep denied") {
		t.Errorf("events %+v, want one PolicyDeadlineExceeded on audit-policy", got)
	}
	if v, _ := f.metric(t, "virtstation_policy_eval_deadline_exceeded_total", map[string]string{"module": "audit.rego"}); v != 1 {
		t.Errorf("deadline metric = %v, want 1", v)
	}
}

// FuzzParseSample: parsing a sample never panics, and what parses is an
// input the shipped set evaluates.
func FuzzParseSample(f *testing.F) {
	for _, n := range []string{"create-workstation", "update-workstation", "create-plain", "create-denied"} {
		b, err := samplesFS.ReadFile("samples/" + n + ".json")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"operation": "UPDATE", "object": {"metadata": {}}, "oldObject": null, "disks": {"d": {}}}`))
	e := mustShippedEngine(f)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := parseSample("fuzz", b)
		if err != nil {
			return
		}
		var de *DeadlineError
		if _, err := e.Evaluate(context.Background(), s.Input); errors.As(err, &de) {
			t.Fatalf("the shipped set ran past its deadline on %q: %v", b, err)
		}
	})
}
