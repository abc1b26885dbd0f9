package mutate

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// gatedSecrets is a SecretWriter whose writes wait until all of them have
// started (or a deadline passes), so a handler that wrote them one after
// another would be seen doing so. errs gives the error per Secret name.
type gatedSecrets struct {
	want int
	errs map[string]error

	mu         sync.Mutex
	started    int
	all        chan struct{}
	written    []string
	concurrent bool
}

func newGatedSecrets(want int, errs map[string]error) *gatedSecrets {
	return &gatedSecrets{want: want, errs: errs, all: make(chan struct{})}
}

func (g *gatedSecrets) Write(_ context.Context, w SecretWrite, _ *kubevirtv1.VirtualMachine) error {
	g.mu.Lock()
	g.started++
	if g.started == g.want {
		close(g.all)
	}
	g.mu.Unlock()
	select {
	case <-g.all:
		g.mu.Lock()
		g.concurrent = true
		g.mu.Unlock()
	case <-time.After(2 * time.Second):
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.written = append(g.written, w.Secret.Name)
	return g.errs[w.Secret.Name]
}

// TestHandlerWritesSecretsConcurrently: the two Secrets of a VM (the SSH
// key Secret and the user-data Secret) are written at the same time, and
// the answer is what writing them in order would give.
func TestHandlerWritesSecretsConcurrently(t *testing.T) {
	vm := vmJSON(stepAnn(api.AnnotationSSHUser, "alice", api.AnnotationSSHPropagation, api.PropagationQemuGuestAgent,
		api.AnnotationDataDisks, "home:/home"), specParts{}.String())
	keys, userData := testName+"-ssh-keys", vmUserDataSecret
	internal := errors.New("etcd is down: secret detail")
	cases := map[string]struct {
		errs        map[string]error
		wantAllowed bool
		wantCode    int32
		wantMessage string
		wantCauses  []string
	}{
		"both written": {wantAllowed: true},
		"a foreign Secret denies, naming it": {
			errs:        map[string]error{userData: ErrForeignSecret},
			wantCode:    http.StatusForbidden,
			wantMessage: "Secret " + testNamespace + "/" + userData + " already exists and is not managed by virtstation",
			wantCauses:  []string{"metadata.name"},
		},
		"the first failure in order decides": {
			errs:        map[string]error{keys: internal, userData: ErrForeignSecret},
			wantCode:    http.StatusInternalServerError,
			wantMessage: "could not write Secret " + keys,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cluster := NewStaticCluster(nil)
			cluster.CollectKeys = fakeCollectKeys
			cluster.AddSecret(testKeySecret())
			cluster.AddDataDisk(api.KindDataVolume, testNamespace, "home", stepLabelDataDisk)
			secrets := newGatedSecrets(2, tc.errs)
			h := NewHandler(cluster, WithSecretWriter(secrets))
			resp := h.Handle(context.Background(), vmRequest(admissionv1.Create, vm, ""))
			if len(secrets.written) != 2 || !secrets.concurrent {
				t.Fatalf("wrote %q (concurrently: %v), want both Secrets written at the same time", secrets.written, secrets.concurrent)
			}
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("Allowed = %v, want %v (%+v)", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			if tc.wantAllowed {
				if len(resp.Patches) == 0 {
					t.Fatalf("admitted without a patch")
				}
				return
			}
			if resp.Result.Code != tc.wantCode || !strings.Contains(resp.Result.Message, tc.wantMessage) {
				t.Fatalf("Result = %d %q, want %d containing %q", resp.Result.Code, resp.Result.Message, tc.wantCode, tc.wantMessage)
			}
			if strings.Contains(resp.Result.Message, "secret detail") {
				t.Errorf("Result.Message %q leaks the internal error", resp.Result.Message)
			}
			var fields []string
			if resp.Result.Details != nil {
				for _, c := range resp.Result.Details.Causes {
					fields = append(fields, c.Field)
				}
			}
			if strings.Join(fields, "|") != strings.Join(tc.wantCauses, "|") {
				t.Errorf("cause fields %q, want %q", fields, tc.wantCauses)
			}
		})
	}
}
