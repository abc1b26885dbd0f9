package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// TestInFlightLimit: with N slots held by admissions that block, k more
// admissions wait for the queue wait and are then denied with code 429 and
// a message (an AdmissionReview for their uid, or a plain 429 for a body
// without one); once the slots are free, admissions are served again.
func TestInFlightLimit(t *testing.T) {
	const (
		slots = 3
		wait  = 200 * time.Millisecond
	)
	cases := map[string]struct {
		excess     int
		body       string
		wantReview bool
	}{
		"reviews":          {excess: 2, body: validReview, wantReview: true},
		"a body, no uid":   {excess: 1, body: `{"kind":"AdmissionReview"}`},
		"no excess at all": {excess: 0, body: validReview},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			limit, err := newInFlight(slots, wait, nil)
			if err != nil {
				t.Fatal(err)
			}
			release := make(chan struct{})
			started := make(chan struct{}, slots)
			blocking := admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
				started <- struct{}{}
				<-release
				return admission.Allowed("")
			})
			srv := httptest.NewServer(limit.Wrap(RequireAdmissionReview(&admission.Webhook{Handler: blocking})))
			defer srv.Close()

			var held sync.WaitGroup
			heldStatus := make(chan int, slots)
			for range slots {
				held.Go(func() {
					resp, err := http.Post(srv.URL, "application/json", strings.NewReader(validReview))
					if err != nil {
						t.Error(err)
						return
					}
					_ = resp.Body.Close()
					heldStatus <- resp.StatusCode
				})
			}
			for range slots {
				<-started
			}

			var excess sync.WaitGroup
			for range tc.excess {
				excess.Go(func() {
					start := time.Now()
					resp, err := http.Post(srv.URL, "application/json", strings.NewReader(tc.body))
					if err != nil {
						t.Error(err)
						return
					}
					defer func() { _ = resp.Body.Close() }()
					if took := time.Since(start); took < wait {
						t.Errorf("refused after %s, before the %s wait", took, wait)
					}
					if resp.Header.Get("Retry-After") == "" {
						t.Error("no Retry-After")
					}
					if !tc.wantReview {
						if resp.StatusCode != http.StatusTooManyRequests {
							t.Errorf("status %d, want 429", resp.StatusCode)
						}
						return
					}
					var review admissionv1.AdmissionReview
					if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || resp.StatusCode != http.StatusOK {
						t.Errorf("status %d, %v: want 200 with an AdmissionReview", resp.StatusCode, err)
						return
					}
					r := review.Response
					if r == nil || r.Allowed || r.UID != "0b6c1b3e-4d0a-4f9e-9a57-1e2c3d4e5f60" || r.Result == nil || r.Result.Code != http.StatusTooManyRequests ||
						!strings.Contains(r.Result.Message, "all 3 admission slots") || !strings.Contains(r.Result.Message, "fix:") {
						t.Errorf("response %+v, want a 429 denial for the request's uid", r)
					}
				})
			}
			excess.Wait()
			close(release)
			held.Wait()
			close(heldStatus)
			for s := range heldStatus {
				if s != http.StatusOK {
					t.Errorf("a held admission got %d", s)
				}
			}
			// Slots are free again.
			resp, err := http.Post(srv.URL, "application/json", strings.NewReader(validReview))
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("after release: status %d", resp.StatusCode)
			}
		})
	}
}

// TestServerRegistersBehindLimit: every handler registered on NewServer's
// server is behind its limit.
func TestServerRegistersBehindLimit(t *testing.T) {
	if d := NewServer(ServerOptions{}).(limitedServer); cap(d.limit.slots) != DefaultMaxInFlight {
		t.Errorf("default slots %d, want %d", cap(d.limit.slots), DefaultMaxInFlight)
	}
	srv := NewServer(ServerOptions{MaxInFlight: 1})
	release, started := make(chan struct{}), make(chan struct{}, 1)
	srv.Register("/hold", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		started <- struct{}{}
		<-release
	}))
	mux := httptest.NewServer(srv.WebhookMux())
	defer mux.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		if resp, err := http.Post(mux.URL+"/hold", "application/json", strings.NewReader(validReview)); err == nil {
			_ = resp.Body.Close()
		}
	}()
	<-started
	resp, err := http.Post(mux.URL+"/hold", "application/json", strings.NewReader(validReview))
	close(release)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Retry-After") == "" {
		t.Errorf("second admission: %s, want a 429 denial (HTTP 200 with Retry-After)", resp.Status)
	}
}
