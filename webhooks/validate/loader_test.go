package validate

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
)

const installNS = "virtstation-system"

// recorded is one Event.
type recorded struct{ Object, Type, Reason, Note string }

// eventLog records Events; safe for concurrent use.
type eventLog struct {
	mu     sync.Mutex
	events []recorded
}

func (l *eventLog) Eventf(regarding runtime.Object, _ runtime.Object, eventType, reason, _ string, note string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	name := ""
	if o, ok := regarding.(client.Object); ok {
		name = o.GetName()
	}
	l.events = append(l.events, recorded{name, eventType, reason, fmt.Sprintf(note, args...)})
}

// take returns and forgets the recorded events.
func (l *eventLog) take() []recorded {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.events
	l.events = nil
	return out
}

func policyConfigMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: name, Labels: map[string]string{api.LabelPolicy: api.LabelTrue}},
		Data:       data,
	}
}

func modesConfigMap(data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: policy.ModesConfigMapName}, Data: data}
}

func sources(ms []Module) map[string]string {
	out := map[string]string{}
	for _, m := range ms {
		out[m.Name] = m.Source
	}
	return out
}

// loaderFixture is a loader over a fake client, with its own metrics.
type loaderFixture struct {
	loader *PolicyLoader
	client client.Client
	events *eventLog
	reg    *prometheus.Registry
	modes  *atomic.Pointer[policy.Modes]
}

func newLoaderFixture(t *testing.T, objs ...client.Object) *loaderFixture {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	f := &loaderFixture{client: c, events: &eventLog{}, reg: reg, modes: &atomic.Pointer[policy.Modes]{}}
	f.loader = &PolicyLoader{Client: c, Namespace: installNS, Engine: NewEngine(0), Recorder: f.events, Modes: f.modes, Metrics: m}
	return f
}

func (f *loaderFixture) reconcile(t *testing.T, name string) {
	t.Helper()
	if _, err := f.loader.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: installNS, Name: name}}); err != nil {
		t.Fatalf("reconcile %s: %v", name, err)
	}
}

// metric returns the value of the metric family with those labels.
func (f *loaderFixture) metric(t *testing.T, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families, err := f.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, fam := range families {
		if fam.GetName() != name {
			continue
		}
	next:
		for _, m := range fam.GetMetric() {
			for _, lp := range m.GetLabel() {
				if labels[lp.GetName()] != lp.GetValue() {
					continue next
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	}
	return 0
}

func (f *loaderFixture) update(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	var cur corev1.ConfigMap
	if err := f.client.Get(context.Background(), client.ObjectKeyFromObject(cm), &cur); err != nil {
		t.Fatal(err)
	}
	cur.Data = cm.Data
	if err := f.client.Update(context.Background(), &cur); err != nil {
		t.Fatal(err)
	}
}

func TestLoaderInitialLoadWithoutConfigMaps(t *testing.T) {
	f := newLoaderFixture(t)
	if err := f.loader.InitialLoad(context.Background()); err != nil {
		t.Fatal(err)
	}
	shipped := Revision(ShippedModules())
	if !f.loader.Engine.Ready() || f.loader.Engine.Revision() != shipped {
		t.Fatalf("engine ready %v revision %q, want %q", f.loader.Engine.Ready(), f.loader.Engine.Revision(), shipped)
	}
	if m := f.modes.Load(); m == nil || len(*m) != 0 {
		t.Errorf("modes %v, want none set", m)
	}
	if v, ok := f.metric(t, "virtstation_policy_revision_info", map[string]string{"revision": shipped}); !ok || v != 1 {
		t.Errorf("revision metric %v %v", v, ok)
	}
	if ev := f.events.take(); len(ev) != 0 {
		t.Errorf("events %v, want none", ev)
	}
}

func TestLoaderPolicyConfigMaps(t *testing.T) {
	good := policyConfigMap("max-disks", sources(operatorMaxDisks))
	other := &corev1.ConfigMap{ // elsewhere: ignored
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "stray", Labels: map[string]string{api.LabelPolicy: api.LabelTrue}},
		Data:       map[string]string{"stray.rego": "package broken {"},
	}
	f := newLoaderFixture(t, good, other)
	ctx := context.Background()
	if err := f.loader.InitialLoad(ctx); err != nil {
		t.Fatal(err)
	}
	first := Revision(Merge(ShippedModules(), operatorMaxDisks))
	if f.loader.Engine.Revision() != first {
		t.Fatalf("revision %q, want %q (shipped + max-disks)", f.loader.Engine.Revision(), first)
	}
	ev := f.events.take()
	if len(ev) != 1 || ev[0].Object != "max-disks" || ev[0].Type != corev1.EventTypeNormal || ev[0].Reason != ReasonPolicyLoaded ||
		!strings.Contains(ev[0].Note, first) || !strings.Contains(ev[0].Note, "2 of them from this ConfigMap") {
		t.Errorf("events %+v", ev)
	}

	// An unchanged set is not reloaded or reported again.
	f.reconcile(t, "max-disks")
	if ev := f.events.take(); len(ev) != 0 {
		t.Errorf("events on an unchanged set: %v", ev)
	}

	// A broken module keeps the last good set and says why, once.
	broken := policyConfigMap("max-disks", map[string]string{"max_disks.rego": "package virtstation.rules.max_disks\n\ndeny contains x if {\n\tx := http.send({})\n}\n"})
	f.update(t, broken)
	for range 2 {
		f.reconcile(t, "max-disks")
	}
	if f.loader.Engine.Revision() != first {
		t.Errorf("revision %q after a broken update, want %q kept", f.loader.Engine.Revision(), first)
	}
	ev = f.events.take()
	if len(ev) != 1 || ev[0].Type != corev1.EventTypeWarning || ev[0].Reason != ReasonPolicyLoadFailed ||
		!strings.Contains(ev[0].Note, "max_disks.rego:4: rego_type_error: undefined function http.send") || !strings.Contains(ev[0].Note, first+" stays active") {
		t.Errorf("events %+v", ev)
	}
	if v, _ := f.metric(t, "virtstation_policy_load_errors_total", nil); v != 1 {
		t.Errorf("load errors %v, want 1", v)
	}
	if v, ok := f.metric(t, "virtstation_policy_revision_info", map[string]string{"revision": first}); !ok || v != 1 {
		t.Errorf("revision metric for the kept set: %v %v", v, ok)
	}

	// A failing test in another ConfigMap is reported on that one only.
	failing := policyConfigMap("a-tests", map[string]string{"a_test.rego": "package virtstation.rules.a\n\ntest_fails if false\n", "README": "not a module"})
	if err := f.client.Create(ctx, failing); err != nil {
		t.Fatal(err)
	}
	f.update(t, good)
	f.reconcile(t, "a-tests")
	ev = f.events.take()
	if len(ev) != 1 || ev[0].Object != "a-tests" || !strings.Contains(ev[0].Note, "a_test.rego:3: test data.virtstation.rules.a.test_fails failed") {
		t.Errorf("events %+v", ev)
	}

	// Fixing it loads the merged set and reports on every policy ConfigMap.
	f.update(t, policyConfigMap("a-tests", map[string]string{"a_test.rego": "package virtstation.rules.a\n\ntest_passes if true\n"}))
	f.reconcile(t, "a-tests")
	want := Revision(Merge(ShippedModules(), append(operatorMaxDisks, Module{Name: "a_test.rego", Source: "package virtstation.rules.a\n\ntest_passes if true\n"})))
	if f.loader.Engine.Revision() != want {
		t.Errorf("revision %q, want %q", f.loader.Engine.Revision(), want)
	}
	ev = f.events.take()
	if len(ev) != 2 || ev[0].Object != "a-tests" || ev[1].Object != "max-disks" || ev[0].Reason != ReasonPolicyLoaded {
		t.Errorf("events %+v", ev)
	}
	if _, ok := f.metric(t, "virtstation_policy_revision_info", map[string]string{"revision": first}); ok {
		t.Error("the old revision is still reported")
	}
	if v, ok := f.metric(t, "virtstation_policy_revision_info", map[string]string{"revision": want}); !ok || v != 1 {
		t.Errorf("revision metric %v %v", v, ok)
	}

	// Deleting the ConfigMaps goes back to the shipped set.
	for _, cm := range []*corev1.ConfigMap{good, failing} {
		if err := f.client.Delete(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	f.reconcile(t, "max-disks")
	if f.loader.Engine.Revision() != Revision(ShippedModules()) {
		t.Errorf("revision %q after deleting the ConfigMaps", f.loader.Engine.Revision())
	}
}

func TestLoaderInitialLoadFallsBackToShipped(t *testing.T) {
	f := newLoaderFixture(t, policyConfigMap("broken", map[string]string{"x.rego": "package x\n\ny := \n"}))
	if err := f.loader.InitialLoad(context.Background()); err != nil {
		t.Fatal(err)
	}
	if f.loader.Engine.Revision() != Revision(ShippedModules()) {
		t.Errorf("revision %q, want the shipped set", f.loader.Engine.Revision())
	}
	ev := f.events.take()
	if len(ev) != 1 || ev[0].Object != "broken" || ev[0].Reason != ReasonPolicyLoadFailed || !strings.Contains(ev[0].Note, "x.rego:4: rego_parse_error") ||
		!strings.Contains(ev[0].Note, "none stays active") {
		t.Errorf("events %+v", ev)
	}
	if v, _ := f.metric(t, "virtstation_policy_load_errors_total", nil); v != 1 {
		t.Errorf("load errors %v", v)
	}
}

func TestLoaderModes(t *testing.T) {
	f := newLoaderFixture(t, modesConfigMap(map[string]string{"mount-path": "warn"}))
	ctx := context.Background()
	if err := f.loader.InitialLoad(ctx); err != nil {
		t.Fatal(err)
	}
	if m := f.modes.Load(); m == nil || m.Mode("mount-path") != policy.ModeWarn {
		t.Fatalf("modes %v", m)
	}
	ev := f.events.take()
	if len(ev) != 1 || ev[0].Object != policy.ModesConfigMapName || ev[0].Reason != ReasonPolicyConfigLoaded || ev[0].Note != "enforcement modes: mount-path=warn" {
		t.Errorf("events %+v", ev)
	}

	f.update(t, modesConfigMap(map[string]string{"mount-path": "warn", "disk-claim": "block"}))
	f.reconcile(t, policy.ModesConfigMapName)
	if m := f.modes.Load(); m.String() != "mount-path=warn" {
		t.Errorf("modes %v after a bad update, want the previous ones", m)
	}
	ev = f.events.take()
	if len(ev) != 1 || ev[0].Type != corev1.EventTypeWarning || ev[0].Reason != ReasonPolicyConfigInvalid || !strings.Contains(ev[0].Note, `data[disk-claim]: Unsupported value: "block"`) {
		t.Errorf("events %+v", ev)
	}

	f.update(t, modesConfigMap(map[string]string{"mount-path": "dryrun"}))
	f.reconcile(t, policy.ModesConfigMapName)
	if m := f.modes.Load(); m.Mode("mount-path") != policy.ModeDryRun {
		t.Errorf("modes %v", m)
	}
	f.reconcile(t, policy.ModesConfigMapName)
	if ev := f.events.take(); len(ev) != 1 {
		t.Errorf("events %+v, want one for the one change", ev)
	}

	if err := f.client.Delete(ctx, modesConfigMap(nil)); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t, policy.ModesConfigMapName)
	if m := f.modes.Load(); m == nil || len(*m) != 0 {
		t.Errorf("modes %v after deleting the ConfigMap, want none", m)
	}
}

func TestLoaderWatches(t *testing.T) {
	l := &PolicyLoader{Namespace: installNS}
	for name, tc := range map[string]struct {
		obj  *corev1.ConfigMap
		want bool
	}{
		"policy":          {policyConfigMap("p", nil), true},
		"modes":           {modesConfigMap(nil), true},
		"unlabelled":      {&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: "x"}}, false},
		"label not true":  {&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: installNS, Name: "x", Labels: map[string]string{api.LabelPolicy: "false"}}}, false},
		"other namespace": {&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: policy.ModesConfigMapName}}, false},
	} {
		if got := l.watched(tc.obj); got != tc.want {
			t.Errorf("%s: watched = %v", name, got)
		}
	}
}

func TestOperatorModules(t *testing.T) {
	cms := []corev1.ConfigMap{
		*policyConfigMap("a", map[string]string{"z.rego": "a-z", "x.rego": "a-x", "notes.txt": "no"}),
		*policyConfigMap("b", map[string]string{"x.rego": "b-x"}),
	}
	mods, owners := OperatorModules(cms)
	if fmt.Sprint(mods) != "[{x.rego b-x virtstation-system/b} {z.rego a-z virtstation-system/a}]" {
		t.Errorf("modules %v", mods)
	}
	if fmt.Sprint(owners) != "map[x.rego:[a b] z.rego:[a]]" {
		t.Errorf("owners %v", owners)
	}
}
