package mutate

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// The mutation step cases are golden files: testdata/steps/NAME.in.yaml is
// the admission (the VM, the stored VM on UPDATE, what the cluster holds)
// and NAME.out.yaml what Mutate answers. Rewrite the out files after a
// deliberate change with
//
//	go test ./webhooks/mutate/ -run 'TestMutateSteps$' -update
//
// and read the diff: it is the change users see.
var update = flag.Bool("update", false, "rewrite testdata/steps/*.out.yaml from what Mutate answers")

const stepsDir = "testdata/steps"

// stepInput is a testdata/steps/*.in.yaml file.
type stepInput struct {
	// Description says what the case shows.
	Description string `json:"description"`
	// Operation defaults to CREATE.
	Operation admissionv1.Operation `json:"operation,omitempty"`
	Cluster   stepCluster           `json:"cluster,omitempty"`
	// OldObject is the stored VM on UPDATE.
	OldObject map[string]any `json:"oldObject,omitempty"`
	Object    map[string]any `json:"object"`
	// Now is the admission's time (Input.Now); unset skips the checks that
	// bound a time.
	Now *metav1.Time `json:"now,omitempty"`
	// Requester and Controller are Input's: who sends the request, and the
	// lifecycle controller's user.
	Requester  string `json:"requester,omitempty"`
	Controller string `json:"controller,omitempty"`
}

// stepCluster is what the case's cluster holds. Secrets are written with
// stringData, which the loader turns into data as the API server does.
type stepCluster struct {
	DataDisks []stepDisk `json:"dataDisks,omitempty"`
	// VMIs are running VirtualMachineInstances, as namespace/name.
	VMIs    []string        `json:"vmis,omitempty"`
	Secrets []corev1.Secret `json:"secrets,omitempty"`
	// KubeVirts are the KubeVirt CRs, whose default architecture a VM that
	// names none gets.
	KubeVirts []kubevirtv1.KubeVirt `json:"kubevirts,omitempty"`
	// LifecycleConfigMaps are the data of the lifecycle ConfigMaps, by
	// namespace; InstallNamespace holds the cluster's.
	LifecycleConfigMaps map[string]map[string]string `json:"lifecycleConfigMaps,omitempty"`
	InstallNamespace    string                       `json:"installNamespace,omitempty"`
}

// stepDisk is a DataVolume or PVC.
type stepDisk struct {
	Kind      string            `json:"kind"`
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// stepOutput is a testdata/steps/*.out.yaml file: Mutate's Result.
type stepOutput struct {
	Denied   []stepDenial      `json:"denied,omitempty"`
	Warnings []string          `json:"warnings,omitempty"`
	Injected map[string]any    `json:"injected,omitempty"`
	Secrets  []stepSecretWrite `json:"secrets,omitempty"`
	Object   map[string]any    `json:"object,omitempty"`
}

// stepDenial is one field.Error of a denial.
type stepDenial struct {
	Type     string `json:"type"`
	Field    string `json:"field"`
	BadValue any    `json:"badValue"`
	Detail   string `json:"detail"`
}

// stepSecretWrite is a Secret the reconcilers write for the admitted VM
// once it is stored, with its data as text.
type stepSecretWrite struct {
	Secret corev1.Secret `json:"secret"`
}

// stepGolden is one loaded case.
type stepGolden struct {
	name string // the file name less .in.yaml
	in   stepInput
	// vm and oldVM are the objects as JSON, as the API server sends them.
	vm, oldVM string
}

// cluster is the case's cluster, with keys collected by fakeCollectKeys.
func (g stepGolden) cluster(t testing.TB) *StaticCluster {
	t.Helper()
	c := NewStaticCluster(nil)
	c.CollectKeys = fakeCollectKeys
	for _, d := range g.in.Cluster.DataDisks {
		c.AddDataDisk(d.Kind, d.Namespace, d.Name, d.Labels)
	}
	for _, v := range g.in.Cluster.VMIs {
		ns, name, ok := strings.Cut(v, "/")
		if !ok {
			t.Fatalf("%s: vmis entry %q: want namespace/name", g.name, v)
		}
		c.AddVMI(ns, name)
	}
	for i := range g.in.Cluster.Secrets {
		s := g.in.Cluster.Secrets[i].DeepCopy()
		for k, v := range s.StringData {
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[k] = []byte(v)
		}
		s.StringData = nil
		c.AddSecret(s)
	}
	for i := range g.in.Cluster.KubeVirts {
		c.AddKubeVirt(&g.in.Cluster.KubeVirts[i])
	}
	for ns, data := range g.in.Cluster.LifecycleConfigMaps {
		c.AddLifecycleConfigMap(ns, data)
	}
	c.SetInstallNamespace(g.in.Cluster.InstallNamespace)
	return c
}

// input is the case's admission.
func (g stepGolden) input(t testing.TB) Input {
	t.Helper()
	in := mutateInput(t, g.in.Operation, g.vm, g.oldVM)
	in.Requester, in.Controller = g.in.Requester, g.in.Controller
	if g.in.Now != nil {
		in.Now = g.in.Now.Time
	}
	return in
}

// loadStepGoldens reads every testdata/steps/*.in.yaml, sorted by name.
func loadStepGoldens(t testing.TB) []stepGolden {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(stepsDir, "*.in.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no step cases in %s: %v", stepsDir, err)
	}
	sort.Strings(files)
	var out []stepGolden
	for _, f := range files {
		g := stepGolden{name: strings.TrimSuffix(filepath.Base(f), ".in.yaml")}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict(b, &g.in); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if g.in.Object == nil {
			t.Fatalf("%s: no object", f)
		}
		g.vm = mustJSON(t, g.in.Object)
		if g.in.OldObject != nil {
			g.oldVM = mustJSON(t, g.in.OldObject)
		}
		out = append(out, g)
	}
	return out
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// renderStepOutput is res as an out.yaml file.
func renderStepOutput(t testing.TB, res Result, secrets []*corev1.Secret) []byte {
	t.Helper()
	out := stepOutput{Warnings: res.Warnings, Object: res.Object}
	for _, e := range res.Denied {
		out.Denied = append(out.Denied, stepDenial{Type: string(e.Type), Field: e.Field, BadValue: e.BadValue, Detail: e.Detail})
	}
	if err := json.Unmarshal([]byte(mustJSON(t, res.Injected)), &out.Injected); err != nil {
		t.Fatal(err)
	}
	for _, sec := range secrets {
		s := sec.DeepCopy()
		s.StringData = map[string]string{}
		for k, v := range s.Data {
			s.StringData[k] = string(v)
		}
		s.Data = nil
		out.Secrets = append(out.Secrets, stepSecretWrite{Secret: *s})
	}
	b, err := yaml.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// compareGolden compares got with the file, or rewrites it under -update.
func compareGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("Mutate's answer differs from %s (-update rewrites it):\n%s", file, lineDiff(string(want), string(got)))
	}
}

// lineDiff shows the lines that differ between want and got, with a line
// of context; enough to read a golden file's change.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl == gl {
			continue
		}
		fmt.Fprintf(&b, "line %d:\n- %s\n+ %s\n", i+1, wl, gl)
	}
	return b.String()
}
