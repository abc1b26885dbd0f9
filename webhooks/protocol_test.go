package webhooks

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
	kjson "sigs.k8s.io/json"
)

// validReview is an AdmissionReview as the API server sends one.
const validReview = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
 "uid":"0b6c1b3e-4d0a-4f9e-9a57-1e2c3d4e5f60",
 "kind":{"group":"kubevirt.io","version":"v1","kind":"VirtualMachine"},
 "resource":{"group":"kubevirt.io","version":"v1","resource":"virtualmachines"},
 "namespace":"ws","name":"dev","operation":"CREATE","userInfo":{"username":"alice"},
 "object":{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"dev","namespace":"ws"}},
 "dryRun":false}}`

func TestCheckAdmissionReview(t *testing.T) {
	cases := map[string]struct {
		body string
		want string // substring of the error; "" means accepted
	}{
		"real review":        {body: validReview},
		"empty object":       {body: `{}`, want: `apiVersion "" and kind ""`},
		"a pod":              {body: `{"apiVersion":"v1","kind":"Pod"}`, want: `apiVersion "v1" and kind "Pod"`},
		"v1beta1":            {body: strings.Replace(validReview, "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1), want: `want "admission.k8s.io/v1"`},
		"no request":         {body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, want: "has no request"},
		"null request":       {body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`, want: "has no request"},
		"empty request":      {body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`, want: "lacks request.uid, request.kind.kind, request.resource.resource"},
		"response only":      {body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"x","allowed":true}}`, want: "has no request"},
		"bad operation":      {body: strings.Replace(validReview, `"CREATE"`, `"PATCH"`, 1), want: `request.operation "PATCH"`},
		"field name case":    {body: strings.Replace(validReview, `"request"`, `"Request"`, 1), want: "has no request"},
		"not json":           {body: `apiVersion: admission.k8s.io/v1`, want: "not JSON"},
		"null":               {body: `null`, want: `apiVersion ""`},
		"array":              {body: `[]`, want: "not JSON"},
		"empty body":         {body: ``, want: "not JSON"},
		"request not object": {body: `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"x"}`, want: "not JSON"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := CheckAdmissionReview([]byte(tc.body))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted, want an error with %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q, want it to contain %q", err, tc.want)
			}
		})
	}
}

// allowHandler allows everything: what a handler does with an empty review
// it cannot tell from a real one.
func allowHandler(context.Context, admission.Request) admission.Response {
	return admission.Allowed("")
}

func TestRequireAdmissionReview(t *testing.T) {
	h := RequireAdmissionReview(&admission.Webhook{Handler: admission.HandlerFunc(allowHandler)})
	cases := map[string]struct {
		method, body string
		wantStatus   int
		wantAllowed  bool
	}{
		"real review":     {method: http.MethodPost, body: validReview, wantStatus: http.StatusOK, wantAllowed: true},
		"empty object":    {method: http.MethodPost, body: `{}`, wantStatus: http.StatusBadRequest},
		"wrong kind":      {method: http.MethodPost, body: `{"kind":"Pod"}`, wantStatus: http.StatusBadRequest},
		"GET":             {method: http.MethodGet, wantStatus: http.StatusMethodNotAllowed},
		"body over limit": {method: http.MethodPost, body: `{"x":"` + strings.Repeat("a", maxReviewBytes) + `"}`, wantStatus: http.StatusRequestEntityTooLarge},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			req := httptest.NewRequest(tc.method, "/mutate", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d (%s), want %d", rec.Code, rec.Body, tc.wantStatus)
			}
			if tc.wantStatus != http.StatusOK {
				return
			}
			var review admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &review); err != nil {
				t.Fatal(err)
			}
			if review.Response == nil || review.Response.Allowed != tc.wantAllowed || review.Response.UID != "0b6c1b3e-4d0a-4f9e-9a57-1e2c3d4e5f60" {
				t.Errorf("response %+v, want allowed=%v for the request's uid", review.Response, tc.wantAllowed)
			}
		})
	}
}

// FuzzCheckAdmissionReview: whatever CheckAdmissionReview accepts, the
// decoder behind controller-runtime's handler reads as a v1 AdmissionReview
// with the same uid and operation; it never panics.
func FuzzCheckAdmissionReview(f *testing.F) {
	for _, s := range []string{validReview, `{}`, `{"kind":"Pod"}`, `null`, `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`,
		strings.Replace(validReview, `"uid"`, `"UID"`, 1)} {
		f.Add([]byte(s))
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(admissionv1.AddToScheme(scheme))
	decoder := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	f.Fuzz(func(t *testing.T, body []byte) {
		if CheckAdmissionReview(body) != nil {
			return
		}
		var env reviewEnvelope
		if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &env); err != nil {
			t.Fatalf("accepted, then does not decode: %v", err)
		}
		var review admissionv1.AdmissionReview
		_, gvk, err := decoder.Decode(body, nil, &review)
		if err != nil {
			// The handler answers a decode error itself (allowed=false):
			// not an allow, so not a protocol hole.
			return
		}
		if gvk.GroupVersion() != admissionv1.SchemeGroupVersion || gvk.Kind != reviewKind {
			t.Fatalf("accepted, decoded as %v", gvk)
		}
		if review.Request == nil || review.Request.UID == "" || review.Request.Operation == "" {
			t.Fatalf("accepted, decoded request %+v", review.Request)
		}
		if string(review.Request.UID) != env.Request.UID || string(review.Request.Operation) != env.Request.Operation {
			t.Fatalf("checked uid %q operation %q, the handler reads uid %q operation %q",
				env.Request.UID, env.Request.Operation, review.Request.UID, review.Request.Operation)
		}
	})
}
