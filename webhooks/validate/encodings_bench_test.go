package validate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"text/tabwriter"

	"github.com/virtstation/virtstation/api"
)

// worstInputVM is the largest input the limits allow for the encodings:
// 16 data disks (253-character names, 255-character mount paths) and 240
// PVC volumes, which with them fill KubeVirt's 256 disks.
func worstInputVM(tb testing.TB) (raw []byte, disks map[string]DiskState) {
	type entry struct {
		Name      string `json:"name"`
		MountPath string `json:"mountPath"`
	}
	disks = map[string]DiskState{}
	var entries []entry
	for i := range api.MaxDataDisks {
		name := fmt.Sprintf("%02d", i) + strings.Repeat("a", 251)
		entries = append(entries, entry{Name: name, MountPath: "/" + fmt.Sprintf("%02d", i) + strings.Repeat("m", 252)})
		disks[name] = DiskState{Exists: true, Labelled: true, Kind: "DataVolume"}
	}
	ann, err := json.Marshal(entries)
	if err != nil {
		tb.Fatal(err)
	}
	var devs, vols []any
	for i := range api.MaxDisks - api.MaxDataDisks {
		name := fmt.Sprintf("pvc-%03d", i)
		devs = append(devs, map[string]any{"name": name, "disk": map[string]any{"bus": "virtio"}})
		vols = append(vols, map[string]any{"name": name, "persistentVolumeClaim": map[string]any{"claimName": name}})
		disks[name] = DiskState{Exists: true, Kind: "PersistentVolumeClaim", SharedBy: []string{"other/vm"}, UsedBy: []string{"other/vmi"}}
	}
	vm := map[string]any{
		"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
		"metadata": map[string]any{"name": "worst", "namespace": "workstations",
			"labels": map[string]any{api.LabelManaged: api.LabelTrue}, "annotations": map[string]any{api.AnnotationDataDisks: string(ann)}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"domain":  map[string]any{"devices": map[string]any{"disks": devs}},
			"volumes": vols,
		}}},
	}
	if raw, err = json.Marshal(vm); err != nil {
		tb.Fatal(err)
	}
	return raw, disks
}

// BenchmarkInputEncodings measures the validating webhook's shortcut of
// building the input's dataDisks, volumeDisks and disks as Rego values
// directly (what EvaluateRequest does) against the reference, the same
// parts as JSON-like Go values that the evaluation converts with
// ast.InterfaceToValue (what Evaluate does with BuildInput's document), side
// by side in one run, on the full VM and the largest input. Both evaluate
// the shipped policies on the decoded request; the difference is the
// encoding. Times are the process's CPU time per call (cpuPerOp).
func BenchmarkInputEncodings(b *testing.B) {
	ctx := context.Background()
	e := mustShippedEngine(b)
	set := e.active.Load()
	worst, worstDisks := worstInputVM(b)
	cases := []struct {
		name  string
		raw   []byte
		disks map[string]DiskState
	}{
		{"full-vm", []byte(fullVM), map[string]DiskState{
			"home-0000":    {Exists: true, Labelled: true, Kind: "DataVolume"},
			"scratch-0000": {Exists: true, Labelled: true, Kind: "PersistentVolumeClaim"},
		}},
		{"worst", worst, worstDisks},
	}
	type row struct {
		name                string
		shortcut, reference float64
	}
	var rows []row
	for _, c := range cases {
		r, err := DecodeRequest("CREATE", "workstations", "", c.raw, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		reference := func() (Decision, error) {
			in, err := r.input(c.disks, set.reads)
			if err != nil {
				return Decision{}, err
			}
			in["dataDisks"] = dataDisksValue(r.DataDisksSpec())
			in["volumeDisks"] = volumeDisksValue(r.volumeDisks)
			values := make(map[string]any, len(c.disks))
			for n, s := range c.disks {
				values[n] = s.value()
			}
			in["disks"] = values
			return set.evaluate(ctx, e.timeout, in)
		}
		short, err := e.EvaluateRequest(ctx, r, c.disks)
		if err != nil {
			b.Fatal(err)
		}
		ref, err := reference()
		if err != nil {
			b.Fatal(err)
		}
		if fmt.Sprint(short) != fmt.Sprint(ref) {
			b.Fatalf("%s: the encodings disagree:\n%v\n%v", c.name, short, ref)
		}
		rw := row{name: c.name}
		b.Run(c.name+"/shortcut", func(b *testing.B) {
			rw.shortcut = cpuPerOp(b, func() {
				if _, err := e.EvaluateRequest(ctx, r, c.disks); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(c.name+"/reference", func(b *testing.B) {
			rw.reference = cpuPerOp(b, func() {
				if _, err := reference(); err != nil {
					b.Fatal(err)
				}
			})
		})
		rows = append(rows, rw)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "input\tRego values µs\tJSON values µs\tsaved µs\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1f\t\n", r.name, r.shortcut/1e3, r.reference/1e3, (r.reference-r.shortcut)/1e3)
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
}

// cpuPerOp runs f b.N times and reports the process's CPU time (user and
// system, GC included) per call as cpu-ns/op: on a machine shared with
// other work it moves far less than the wall time does. It returns it.
func cpuPerOp(b *testing.B, f func()) float64 {
	b.ReportAllocs()
	var before, after syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		f()
	}
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
		b.Fatal(err)
	}
	cpu := func(r syscall.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
	ns := float64(cpu(after)-cpu(before)) / float64(b.N)
	b.ReportMetric(ns, "cpu-ns/op")
	return ns
}
