package webhooks

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

const sizeTestUID = "6f1d2c3b-4a59-4e7f-8d9c-0a1b2c3d4e5f"

// reviewWithObjects is the reader of an AdmissionReview for a ConfigMap
// whose object and (with oldSize > 0) oldObject have a data value padded
// so that each object's JSON is exactly its size in bytes; the padding is
// generated as it is read, so the test itself holds none of it.
func reviewWithObjects(op string, objSize, oldSize int) (io.Reader, int64) {
	head := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"` + sizeTestUID + `",` +
		`"kind":{"group":"","version":"v1","kind":"ConfigMap"},"resource":{"group":"","version":"v1","resource":"configmaps"},` +
		`"namespace":"ws","name":"big","operation":"` + op + `","userInfo":{"username":"alice"}`
	var parts []io.Reader
	n := int64(0)
	add := func(r io.Reader, size int64) { parts = append(parts, r); n += size }
	add(strings.NewReader(head), int64(len(head)))
	object := func(field string, size int) {
		pre := `,"` + field + `":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"big","namespace":"ws"},"data":{"x":"`
		post := `"}}`
		add(strings.NewReader(pre), int64(len(pre)))
		pad := size - (len(pre) - len(`,"`+field+`":`)) - len(post)
		add(io.LimitReader(repeatA{}, int64(pad)), int64(pad))
		add(strings.NewReader(post), int64(len(post)))
	}
	object("object", objSize)
	if oldSize > 0 {
		object("oldObject", oldSize)
	}
	add(strings.NewReader(`}}`), 2)
	return io.MultiReader(parts...), n
}

// repeatA reads an endless run of 'a'.
type repeatA struct{}

func (repeatA) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// heapAllocs is the process's cumulative heap allocation.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestReviewSizeLimits: an object over MaxObjectBytes, or a body over
// maxReviewBytes, is denied with code 413 and a message naming the limit
// and the fix, before the handler decodes it, and what the refusal costs
// in heap does not grow with the body; objects at the limit pass.
func TestReviewSizeLimits(t *testing.T) {
	var reached bool
	h := RequireAdmissionReview(&admission.Webhook{Handler: admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		reached = true
		return allowHandler(ctx, req)
	})})
	cases := map[string]struct {
		op               string
		obj, old         int
		noContentLength  bool
		wantStatus       int
		wantAllowed      bool
		wantDenialCode   int32
		wantMessage      []string
		maxAllocsOverLen int64 // heap allocated beyond the body's own size; 0: no bound checked
		maxAllocs        int64 // heap allocated in all; 0: no bound checked
	}{
		"create at the limit":       {op: "CREATE", obj: MaxObjectBytes, wantStatus: http.StatusOK, wantAllowed: true},
		"update, both at the limit": {op: "UPDATE", obj: MaxObjectBytes, old: MaxObjectBytes, wantStatus: http.StatusOK, wantAllowed: true},
		"object one byte over": {
			op: "CREATE", obj: MaxObjectBytes + 1, wantStatus: http.StatusOK, wantDenialCode: http.StatusRequestEntityTooLarge,
			wantMessage: []string{"request.object is 1.50 MiB (1572865 bytes), over the 1.50 MiB (1572864 bytes) limit", "fix: make the object smaller", "userDataSecretRef"},
			// Read once, the envelope decoded, nothing else.
			maxAllocsOverLen: 256 << 10,
		},
		"old object one byte over": {
			op: "UPDATE", obj: 1000, old: MaxObjectBytes + 1, wantStatus: http.StatusOK, wantDenialCode: http.StatusRequestEntityTooLarge,
			wantMessage: []string{"request.oldObject is 1.50 MiB"},
		},
		"body over the limit": {
			op: "CREATE", obj: maxReviewBytes, wantStatus: http.StatusOK, wantDenialCode: http.StatusRequestEntityTooLarge,
			wantMessage: []string{"its AdmissionReview is 3.25 MiB", "over the 3.25 MiB (3407872 bytes) limit", "fix:"},
			maxAllocs:   512 << 10,
		},
		"body of 64 MiB": {
			op: "CREATE", obj: 64 << 20, wantStatus: http.StatusOK, wantDenialCode: http.StatusRequestEntityTooLarge,
			wantMessage: []string{"its AdmissionReview is 64.00 MiB"},
			maxAllocs:   512 << 10,
		},
		"body of 64 MiB, chunked": {
			op: "CREATE", obj: 64 << 20, noContentLength: true, wantStatus: http.StatusOK, wantDenialCode: http.StatusRequestEntityTooLarge,
			wantMessage: []string{"AdmissionReview is over 3.25 MiB"},
			// At most the limit is read, whatever follows.
			maxAllocs: 8 * maxReviewBytes,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			body, n := reviewWithObjects(tc.op, tc.obj, tc.old)
			req := httptest.NewRequest(http.MethodPost, "/validate", body)
			req.ContentLength = n
			if tc.noContentLength {
				req.ContentLength = -1
			}
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			reached = false
			runtime.GC()
			before := heapAllocs()
			h.ServeHTTP(rec, req)
			allocs := int64(heapAllocs() - before)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d (%.300s), want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			var review admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
				t.Fatalf("answer is not an AdmissionReview: %v: %.300s", err, rec.Body)
			}
			resp := review.Response
			if resp == nil || resp.UID != sizeTestUID || resp.Allowed != tc.wantAllowed {
				t.Fatalf("response %+v, want allowed=%v for uid %s", resp, tc.wantAllowed, sizeTestUID)
			}
			// allowHandler allows: reaching it and being allowed go together.
			if reached != tc.wantAllowed {
				t.Errorf("handler reached = %v, want %v", reached, tc.wantAllowed)
			}
			if tc.wantDenialCode != 0 {
				if resp.Result == nil || resp.Result.Code != tc.wantDenialCode {
					t.Fatalf("result %+v, want code %d", resp.Result, tc.wantDenialCode)
				}
				for _, w := range tc.wantMessage {
					if !strings.Contains(resp.Result.Message, w) {
						t.Errorf("message %q lacks %q", resp.Result.Message, w)
					}
				}
			}
			if tc.maxAllocsOverLen > 0 && allocs > n+tc.maxAllocsOverLen {
				t.Errorf("refusing a %d-byte review allocated %d bytes, want at most %d", n, allocs, n+tc.maxAllocsOverLen)
			}
			if tc.maxAllocs > 0 && allocs > tc.maxAllocs {
				t.Errorf("refusing a %d-byte review allocated %d bytes, want at most %d", n, allocs, tc.maxAllocs)
			}
			t.Logf("%d-byte review: %d bytes allocated", n, allocs)
		})
	}
}

// TestTooLargeWithoutUID: a body over the limit whose start holds no
// request.uid gets a plain 413.
func TestTooLargeWithoutUID(t *testing.T) {
	h := RequireAdmissionReview(&admission.Webhook{Handler: admission.HandlerFunc(allowHandler)})
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","x":"` + strings.Repeat("a", maxReviewBytes) + `"}`
	req := httptest.NewRequest(http.MethodPost, "/validate", strings.NewReader(body))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusRequestEntityTooLarge || !strings.Contains(rec.Body.String(), "over the 3.25 MiB") {
		t.Errorf("status %d: %.300s, want 413 naming the limit", rec.Code, rec.Body)
	}
}

func TestSniffUID(t *testing.T) {
	cases := map[string]struct{ body, want string }{
		"review":               {body: validReview, want: "0b6c1b3e-4d0a-4f9e-9a57-1e2c3d4e5f60"},
		"uid after the object": {body: `{"kind":"AdmissionReview","request":{"object":{"a":[1,{"b":2}]},"uid":"u1"}}`, want: "u1"},
		"cut before the uid":   {body: `{"kind":"AdmissionReview","request":{"object":{"a":`},
		"no request":           {body: `{"kind":"AdmissionReview"}`},
		"uid not a string":     {body: `{"request":{"uid":3}}`},
		"not JSON":             {body: `uid`},
		"array":                {body: `[{"request":{"uid":"u"}}]`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := sniffUID(strings.NewReader(tc.body)); got != tc.want {
				t.Errorf("uid %q, want %q", got, tc.want)
			}
		})
	}
}
