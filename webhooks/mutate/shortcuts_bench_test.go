package mutate

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"syscall"
	"testing"
	"text/tabwriter"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// BenchmarkMutateShortcuts measures the mutating webhook's two speed
// shortcuts against the reference paths they stand in for, side by side in
// one run, and against the webhook's whole work per admission
// (Handler.Handle, as BenchmarkMutatingWebhookLimits times it), on the
// typical VM and the largest ones the limits allow:
//
//   - patch: Patch on the decoded objects, against encoding the mutated
//     object and admission.PatchResponseFromRaw (controller-runtime's
//     defaulter);
//   - keycase: keyCaseClean from the Go types, against the full check on
//     the typed view's encoding (checkKeyCaseEncoded), which DecodeVM runs
//     when the shortcut is in doubt.
//
// Times are the process's CPU time per call (cpuPerOp). It prints, per
// VM, what each shortcut saves as a share of Handle's time
// with the reference path instead (handle - shortcut + reference).
func BenchmarkMutateShortcuts(b *testing.B) {
	ctx := context.Background()
	keep := map[string]bool{"typical": true, "data-disks-16-longest": true, "disks-256": true, "all-limits": true}
	type row struct {
		name                                     string
		handle, patch, patchRef, keycase, keyRef float64
	}
	var rows []row
	for _, c := range limitBenchCases(b) {
		if !keep[c.name] {
			continue
		}
		req := vmRequest(admissionv1.Create, c.vm, "")
		raw := req.Object.Raw
		h := NewHandler(c.cluster)
		in, err := decodeInput(req)
		if err != nil {
			b.Fatal(err)
		}
		res, err := Mutate(ctx, in, c.cluster)
		if err != nil || len(res.Denied) > 0 {
			b.Fatalf("%s: mutate: %v %v", c.name, err, res.Denied)
		}
		if !keyCaseClean(in.Object, vmType) {
			b.Fatalf("%s: keyCaseClean is in doubt; DecodeVM would run the full check anyway", c.name)
		}
		r := row{name: c.name}
		b.Run(c.name+"/handle", func(b *testing.B) {
			r.handle = cpuPerOp(b, func() {
				if resp := h.Handle(ctx, req); !resp.Allowed {
					b.Fatal(resp.Result)
				}
			})
		})
		b.Run(c.name+"/patch/shortcut", func(b *testing.B) {
			r.patch = cpuPerOp(b, func() {
				ops, err := Patch(in.Object, res.Object)
				if err != nil {
					b.Fatal(err)
				}
				if resp := admission.Patched("", ops...); !resp.Allowed {
					b.Fatal(resp.Result)
				}
			})
		})
		b.Run(c.name+"/patch/reference", func(b *testing.B) {
			r.patchRef = cpuPerOp(b, func() {
				out, err := json.Marshal(res.Object)
				if err != nil {
					b.Fatal(err)
				}
				if resp := admission.PatchResponseFromRaw(raw, out); !resp.Allowed {
					b.Fatal(resp.Result)
				}
			})
		})
		b.Run(c.name+"/keycase/shortcut", func(b *testing.B) {
			r.keycase = cpuPerOp(b, func() {
				if !keyCaseClean(in.Object, vmType) {
					b.Fatal("in doubt")
				}
			})
		})
		b.Run(c.name+"/keycase/reference", func(b *testing.B) {
			r.keyRef = cpuPerOp(b, func() {
				if err := checkKeyCaseEncoded(in.Object, in.VM); err != nil {
					b.Fatal(err)
				}
			})
		})
		rows = append(rows, r)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "VM\thandle µs\tpatch µs\tPatchResponseFromRaw µs\tpatch saves\tkeyCaseClean µs\tfull check µs\tkeycase saves\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1f\t%.1f%%\t%.1f\t%.1f\t%.1f%%\t\n", r.name, r.handle/1e3,
			r.patch/1e3, r.patchRef/1e3, 100*(r.patchRef-r.patch)/(r.handle-r.patch+r.patchRef),
			r.keycase/1e3, r.keyRef/1e3, 100*(r.keyRef-r.keycase)/(r.handle-r.keycase+r.keyRef))
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
