package admission_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtstation/virtstation/webhooks"
	"github.com/virtstation/virtstation/webhooks/mutate"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// Peak-heap measurement.
const (
	// peakSampleEvery is how often the sampler reads the heap while a call
	// runs: a call at the size limit takes tens of milliseconds.
	peakSampleEvery = 20 * time.Microsecond
	// peakGCPercent is GOGC while measuring: the collector runs after
	// every 10% of heap growth, so what the sampler sees is what the call
	// holds, plus at most a tenth of the heap in garbage not yet collected.
	peakGCPercent = 10
	// paddingAnnotation pads the full VM to the size wanted: an annotation
	// of the VM template, which neither the webhooks nor the API server
	// read, as large user content would be.
	paddingAnnotation = "example.com/padding"
)

// heapObjects is the heap held by objects, live or not yet swept.
func heapObjects() uint64 {
	s := [1]metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s[:])
	return s[0].Value.Uint64()
}

// peakOf runs call after a collection and returns the most heap, above
// what was in use before it, that the process held while call ran.
func peakOf(call func()) uint64 {
	runtime.GC()
	base := heapObjects()
	var peak atomic.Uint64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(peakSampleEvery)
		defer t.Stop()
		for {
			if h := heapObjects(); h > base && h-base > peak.Load() {
				peak.Store(h - base)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	call()
	close(stop)
	<-done
	if h := heapObjects(); h > base && h-base > peak.Load() {
		peak.Store(h - base)
	}
	return peak.Load()
}

// paddedReviews are the two reviews of one admission of the full VM
// padded so that the object the validating webhook sees (the larger one,
// after mutation) is size bytes of JSON.
func paddedReviews(ctx context.Context, tb testing.TB, s *server, hc *http.Client, ns string, size int, manyKeys bool) (rv reviews, mutSize int, mutated []byte) {
	tb.Helper()
	build := func(pad int) (raw, mutated []byte) {
		vm := newVM(full, labelled, ns, 0)
		vm.TypeMeta = metav1.TypeMeta{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine"}
		if vm.Spec.Template.ObjectMeta.Annotations == nil {
			vm.Spec.Template.ObjectMeta.Annotations = map[string]string{}
		}
		ann := vm.Spec.Template.ObjectMeta.Annotations
		if manyKeys {
			// Entries of 42 bytes each ("example.com/p-000000":"x…x",),
			// the rest in the one padding value.
			const entry = len(`"example.com/p-000000":"xxxxxxxxxxxxxxxx",`)
			for i := 0; pad > 2*entry; i++ {
				ann[fmt.Sprintf("example.com/p-%06d", i)] = "xxxxxxxxxxxxxxxx"
				pad -= entry
			}
		}
		ann[paddingAnnotation] = strings.Repeat("x", pad)
		raw, err := json.Marshal(vm)
		if err != nil {
			tb.Fatal(err)
		}
		resp, err := call(ctx, hc, "https://"+s.addr+mutate.Path, review(raw, ns, vm.Name))
		if err != nil || !resp.Allowed {
			tb.Fatalf("mutate the padded VM: %v %+v", err, resp)
		}
		ops, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			tb.Fatal(err)
		}
		if mutated, err = ops.Apply(raw); err != nil {
			tb.Fatal(err)
		}
		return raw, mutated
	}
	_, small := build(0)
	if manyKeys {
		// The entries' count is only known once they are built: size the
		// rest from a first try.
		_, first := build(size - len(small))
		_, small = build(0)
		small = append(small, make([]byte, len(first)-size)...)
	}
	raw, mutated := build(size - len(small))
	if len(mutated) != size {
		tb.Fatalf("padded VM is %d bytes after mutation, want %d", len(mutated), size)
	}
	val := review(mutated, ns, "padded")
	if resp, err := call(ctx, hc, "https://"+s.addr+validate.VMPath, val); err != nil || !resp.Allowed {
		tb.Fatalf("validate the padded VM: %v %+v", err, resp)
	}
	return reviews{mutate: review(raw, ns, "padded"), validate: val}, len(raw), mutated
}

// post sends body and reads the answer to the end, keeping none of it.
func post(ctx context.Context, tb testing.TB, hc *http.Client, url string, body []byte) int {
	tb.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		tb.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		tb.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		tb.Fatal(err)
	}
	return resp.StatusCode
}

// BenchmarkAdmissionPeakHeap measures issue 27's goal: the peak heap of
// one admission of the full VM, padded to the largest object the webhooks
// take (webhooks.MaxObjectBytes), divided by the object's size (goal: at
// most 8). The padding is template annotations, which the webhooks do not
// read: one large value ("one-value"), or 42-byte entries ("many-keys",
// which cost more to decode per byte). One admission is the mutate call and the validate call, each
// over HTTPS through the server's whole handler chain (the admission
// limit, webhooks.RequireAdmissionReview, controller-runtime's
// webhook.Admission and the handler), one after the other, with the load
// generator's part (the body, written from memory; the answer, discarded)
// in the same process. It also reports the peak of a review one byte over
// the limit, which is refused before it is decoded, and what each call
// allocates in all per byte of object.
func BenchmarkAdmissionPeakHeap(b *testing.B) {
	ctx := context.Background()
	ns := "workstations"
	s := startServer(ctx, b, ns)
	defer s.stop()
	hc := loadClient()
	for _, manyKeys := range []bool{false, true} {
		name := "one-value"
		if manyKeys {
			name = "many-keys"
		}
		b.Run(name, func(b *testing.B) { peakHeap(ctx, b, s, hc, ns, manyKeys) })
	}
}

// peakHeap is one padding of BenchmarkAdmissionPeakHeap.
func peakHeap(ctx context.Context, b *testing.B, s *server, hc *http.Client, ns string, manyKeys bool) {
	rv, mutSize, mutated := paddedReviews(ctx, b, s, hc, ns, webhooks.MaxObjectBytes, manyKeys)
	valSize := len(mutated)
	over := review(bytes.Replace(mutated, []byte(`"`+paddingAnnotation+`":"x`), []byte(`"`+paddingAnnotation+`":"xx`), 1), ns, "padded")
	mutURL, valURL := "https://"+s.addr+mutate.Path, "https://"+s.addr+validate.VMPath
	defer debug.SetGCPercent(debug.SetGCPercent(peakGCPercent))

	var mutPeak, valPeak, overPeak, mutAllocs, valAllocs uint64
	allocs := func() uint64 {
		s := [1]metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
		metrics.Read(s[:])
		return s[0].Value.Uint64()
	}
	measure := func(url string, body []byte) (peak, allocated uint64) {
		a0 := allocs()
		peak = peakOf(func() {
			if code := post(ctx, b, hc, url, body); code != http.StatusOK {
				b.Fatalf("%s: HTTP %d", url, code)
			}
		})
		return peak, allocs() - a0
	}
	for b.Loop() {
		p, a := measure(mutURL, rv.mutate)
		mutPeak, mutAllocs = max(mutPeak, p), max(mutAllocs, a)
		p, a = measure(valURL, rv.validate)
		valPeak, valAllocs = max(valPeak, p), max(valAllocs, a)
		p, _ = measure(valURL, over)
		overPeak = max(overPeak, p)
	}
	admission := max(float64(mutPeak)/float64(mutSize), float64(valPeak)/float64(valSize))
	b.ReportMetric(admission, "peak-heap/object-byte")
	b.ReportMetric(float64(mutPeak)/float64(mutSize), "mutate-peak/object-byte")
	b.ReportMetric(float64(valPeak)/float64(valSize), "validate-peak/object-byte")
	b.ReportMetric(float64(overPeak)/float64(valSize+1), "refused-peak/object-byte")
	b.ReportMetric(float64(mutAllocs)/float64(mutSize), "mutate-allocs/object-byte")
	b.ReportMetric(float64(valAllocs)/float64(valSize), "validate-allocs/object-byte")
	b.ReportMetric(float64(max(mutPeak, valPeak))/(1<<20), "peak-heap-MiB")
	b.ReportMetric(float64(valSize), "object-bytes")
}
