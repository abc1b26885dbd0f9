package admission_test

import (
	"context"
	"testing"

	"github.com/virtstation/virtstation/webhooks/mutate"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// BenchmarkWebhookCalls times each webhook call of one admission of the
// full VM on its own, one at a time over HTTPS keep-alive against the
// webhook server alone (Secret writes and claim patches stubbed, as in
// BenchmarkWebhookAdmission): the whole call as the API server makes it,
// client side included. It reports the process's CPU time per call
// (cpu-ns/op), the denominator docs/benchmarks.md ("The shortcuts,
// measured") divides the shortcuts' savings by.
func BenchmarkWebhookCalls(b *testing.B) {
	ctx := context.Background()
	ns := "workstations"
	s := startServer(ctx, b, ns)
	defer s.stop()
	hc := loadClient()
	rv := buildReviews(ctx, b, s, hc, ns)
	for _, c := range []struct {
		name, url string
		body      []byte
	}{
		{"mutate", "https://" + s.addr + mutate.Path, rv.mutate},
		{"validate", "https://" + s.addr + validate.VMPath, rv.validate},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			before := processCPU()
			for b.Loop() {
				if err := admit(ctx, hc, c.url, c.body); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(processCPU()-before)/float64(b.N), "cpu-ns/op")
		})
	}
}
