package envtest_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/webhooks/mutate"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// protocolTimeout bounds one direct call to the webhook server.
const protocolTimeout = 10 * time.Second

// webhookPaths are the paths the webhook server registers.
var webhookPaths = []string{mutate.Path, validate.VMPath, validate.ConfigMapPath, claims.DeletionGuardPath}

// TestNotAnAdmissionReview POSTs bodies that are not AdmissionReviews
// straight to every webhook path: each is a 400 naming what is wrong, never
// a 200 "allowed". A real review of an object no rule applies to (a
// ConfigMap outside the install namespace) is still answered with its uid.
func TestNotAnAdmissionReview(t *testing.T) {
	cases := map[string]struct {
		body string
		want string // in the 400's message
	}{
		"empty object":                 {`{}`, `apiVersion "" and kind ""`},
		"a pod":                        {`{"apiVersion":"v1","kind":"Pod"}`, `kind "Pod"`},
		"kind only":                    {`{"kind":"Pod"}`, `kind "Pod"`},
		"review without request":       {`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`, "has no request"},
		"v1beta1 review":               {strings.Replace(configMapReview, "admission.k8s.io/v1", "admission.k8s.io/v1beta1", 1), `want "admission.k8s.io/v1"`},
		"review with an empty request": {`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{}}`, "lacks request.uid"},
		"not JSON":                     {`kind: AdmissionReview`, "not JSON"},
	}
	for _, path := range webhookPaths {
		for name, tc := range cases {
			t.Run(path+"/"+name, func(t *testing.T) {
				status, body := postBody(t, path, tc.body)
				if status != http.StatusBadRequest || !strings.Contains(body, tc.want) {
					t.Errorf("HTTP %d %q, want 400 with %q", status, body, tc.want)
				}
			})
		}
		t.Run(path+"/real review", func(t *testing.T) {
			status, body := postBody(t, path, configMapReview)
			if status != http.StatusOK {
				t.Fatalf("HTTP %d %q, want 200", status, body)
			}
			var review admissionv1.AdmissionReview
			if err := json.Unmarshal([]byte(body), &review); err != nil {
				t.Fatal(err)
			}
			if review.Response == nil || review.Response.UID != "5c0b3b0e-6f4c-4d5e-9b0a-1d2e3f405162" {
				t.Errorf("response %+v, want one for the request's uid", review.Response)
			}
		})
	}
}

// configMapReview is a dry-run CREATE of an unlabelled ConfigMap outside
// the install namespace, as the API server would send it.
const configMapReview = `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{
 "uid":"5c0b3b0e-6f4c-4d5e-9b0a-1d2e3f405162",
 "kind":{"group":"","version":"v1","kind":"ConfigMap"},
 "resource":{"group":"","version":"v1","resource":"configmaps"},
 "namespace":"default","name":"protocol-test","operation":"CREATE","dryRun":true,
 "userInfo":{"username":"alice"},
 "object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"protocol-test","namespace":"default"}}}}`

// postBody POSTs body to path on the webhook server and returns the
// status and the body of the answer.
func postBody(t *testing.T, path, body string) (int, string) {
	t.Helper()
	url, _ := env.WebhookURL(path)
	// As the API server: the webhook requires its client certificate.
	c := env.WebhookHTTPClient(protocolTimeout)
	resp, err := c.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }() // read below; a close error changes nothing
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}
