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
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// BenchmarkMutateShortcuts measures the two parts of the mutating
// webhook's work that the typed view changed, against the reference paths
// beside them, in one run, and against the webhook's whole work per
// admission (Handler.Handle, as BenchmarkMutatingWebhookLimits times it),
// on the typical VM and the largest ones the limits allow:
//
//   - patch: patchFor, the typed view as decoded and as mutated carried
//     onto the raw object, against encoding the mutated typed VM and
//     admission.PatchResponseFromRaw (controller-runtime's defaulter, which
//     would also remove every field the Go types do not know);
//   - decode: DecodeVM (sigs.k8s.io/json, case-sensitive and strict),
//     against encoding/json's case-insensitive decoding of the typed VM.
//
// The shortcuts this replaced (a generic map beside the typed view, a
// diff of the maps, a key-case check from the Go types) were measured in
// the same table before; docs/benchmarks.md keeps both. Times are the
// process's CPU time per call (cpuPerOp). It prints, per VM, the share of
// Handle's time each part costs.
func BenchmarkMutateShortcuts(b *testing.B) {
	ctx := context.Background()
	keep := map[string]bool{"typical": true, "data-disks-16-longest": true, "disks-256": true, "all-limits": true}
	type row struct {
		name                                    string
		handle, patch, patchRef, decode, decRef float64
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
		r := row{name: c.name}
		b.Run(c.name+"/handle", func(b *testing.B) {
			r.handle = cpuPerOp(b, func() {
				if resp := h.Handle(ctx, req); !resp.Allowed {
					b.Fatal(resp.Result)
				}
			})
		})
		b.Run(c.name+"/patch/typed", func(b *testing.B) {
			r.patch = cpuPerOp(b, func() {
				ops, err := patchFor(raw, in.VM, res.VM)
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
				out, err := json.Marshal(res.VM)
				if err != nil {
					b.Fatal(err)
				}
				if resp := admission.PatchResponseFromRaw(raw, out); !resp.Allowed {
					b.Fatal(resp.Result)
				}
			})
		})
		b.Run(c.name+"/decode/strict", func(b *testing.B) {
			r.decode = cpuPerOp(b, func() {
				if _, err := DecodeVM(raw); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(c.name+"/decode/reference", func(b *testing.B) {
			r.decRef = cpuPerOp(b, func() {
				if err := json.Unmarshal(raw, &kubevirtv1.VirtualMachine{}); err != nil {
					b.Fatal(err)
				}
			})
		})
		rows = append(rows, r)
	}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "VM\thandle µs\tpatch µs\tPatchResponseFromRaw µs\tpatch share\tDecodeVM µs\tencoding/json µs\tdecode share\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%.1f\t%.1f\t%.1f\t%.1f%%\t%.1f\t%.1f\t%.1f%%\t\n", r.name, r.handle/1e3,
			r.patch/1e3, r.patchRef/1e3, 100*r.patch/r.handle, r.decode/1e3, r.decRef/1e3, 100*r.decode/r.handle)
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
