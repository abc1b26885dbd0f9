package mutate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// stashWrite is a dry run's would-be Secret <name>-userdata of n data bytes.
func stashWrite(name string, n int) []SecretWrite {
	return []SecretWrite{{Secret: &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: UserDataSecretName(name)},
		Data:       map[string][]byte{userDataKey: make([]byte, n)},
	}}}
}

func uidN(i int) types.UID { return types.UID(fmt.Sprintf("uid-%04d", i)) }

// stashState is what a lookup of each request's Secret finds.
func stashState(s *secretStash, n int, now time.Time) (kept, forgotten, absent []int) {
	for i := range n {
		sec, err := s.get(uidN(i), testNamespace, UserDataSecretName(fmt.Sprint(i)), now)
		var fe *forgottenError
		switch {
		case errors.As(err, &fe):
			forgotten = append(forgotten, i)
		case err != nil:
			panic(err)
		case sec != nil:
			kept = append(kept, i)
		default:
			absent = append(absent, i)
		}
	}
	return kept, forgotten, absent
}

func span(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func TestSecretStashBounds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	small, big := 1<<10, 3<<20
	for name, tc := range map[string]struct {
		// puts are the request sizes, one a second from t0, except
		// where at gives the offset.
		sizes []int
		at    map[int]time.Duration
		// lookups happen one second after the last put.
		wantKept, wantForgotten, wantAbsent []int
	}{
		"by count: the oldest goes first": {
			sizes:         repeat(small, maxDryRunEntries+2),
			wantKept:      span(2, maxDryRunEntries+2),
			wantForgotten: []int{0, 1},
		},
		"by bytes: the oldest goes first": {
			sizes:         []int{big, big, big, small},
			wantKept:      []int{1, 2, 3},
			wantForgotten: []int{0},
		},
		"expired entries go before live ones, and are not reported as dropped": {
			// Three would not fit: without expiry, 0 would be evicted
			// while live and its reinvocation refused.
			sizes:      []int{big, big, big},
			at:         map[int]time.Duration{0: 0, 1: time.Second, 2: dryRunTTL + time.Second/2},
			wantKept:   []int{1, 2},
			wantAbsent: []int{0},
		},
		"an entry larger than the whole stash is never kept": {
			sizes:         []int{small, maxDryRunBytes + 1, small},
			wantKept:      []int{0, 2},
			wantForgotten: []int{1},
		},
	} {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			m, err := NewDryRunMetrics(reg)
			if err != nil {
				t.Fatal(err)
			}
			s := &secretStash{metrics: m}
			last := t0
			for i, n := range tc.sizes {
				at := t0.Add(time.Duration(i) * time.Millisecond)
				if d, ok := tc.at[i]; ok {
					at = t0.Add(d)
				}
				s.put(uidN(i), stashWrite(fmt.Sprint(i), n), at)
				last = at
				if entries, bytes := s.stats(); entries > maxDryRunEntries || bytes > maxDryRunBytes {
					t.Fatalf("after put %d: %d entries, %d bytes; bounds %d, %d", i, entries, bytes, maxDryRunEntries, maxDryRunBytes)
				}
			}
			kept, forgotten, absent := stashState(s, len(tc.sizes), last.Add(time.Millisecond))
			if fmt.Sprint(kept) != fmt.Sprint(tc.wantKept) || fmt.Sprint(forgotten) != fmt.Sprint(tc.wantForgotten) || fmt.Sprint(absent) != fmt.Sprint(tc.wantAbsent) {
				t.Errorf("kept %v, forgotten %v, absent %v; want %v, %v, %v", kept, forgotten, absent, tc.wantKept, tc.wantForgotten, tc.wantAbsent)
			}
			entries, bytes := s.stats()
			if got := testutil.ToFloat64(m.entries); got != float64(entries) {
				t.Errorf("entries gauge %v, stash holds %d", got, entries)
			}
			if got := testutil.ToFloat64(m.bytes); got != float64(bytes) {
				t.Errorf("bytes gauge %v, stash holds %d", got, bytes)
			}
			if got := testutil.ToFloat64(m.refusals); got != float64(len(forgotten)) {
				t.Errorf("refusals %v, want %d (one per lookup of a dropped entry)", got, len(forgotten))
			}
		})
	}
}

func repeat(n, times int) []int {
	out := make([]int, times)
	for i := range out {
		out[i] = n
	}
	return out
}

// TestSecretStashForgetsWithinBounds: the record of dropped entries is
// bounded too.
func TestSecretStashForgetsWithinBounds(t *testing.T) {
	s := &secretStash{}
	now := time.Now()
	for i := range maxDryRunEntries + 2*maxDryRunForgotten {
		s.put(uidN(i), stashWrite(fmt.Sprint(i), 1), now.Add(time.Duration(i)*time.Microsecond))
	}
	if len(s.forgotten) > maxDryRunForgotten || len(s.entries) > maxDryRunEntries {
		t.Fatalf("%d forgotten, %d entries; bounds %d, %d", len(s.forgotten), len(s.entries), maxDryRunForgotten, maxDryRunEntries)
	}
}

// recordingWriter counts Secret writes.
type recordingWriter struct {
	mu     sync.Mutex
	writes []string
}

func (w *recordingWriter) Write(_ context.Context, sw SecretWrite, _ *kubevirtv1.VirtualMachine) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes = append(w.writes, sw.Secret.Name)
	return nil
}

// TestDryRunReinvocationAfterEviction: when the stash had to drop a dry
// run's Secret before the API server reinvoked the webhook, the
// reinvocation gets a 429 saying why and what to do, never a NotFound
// denial about a Secret the user never named nor the stored VM's user-data;
// and nothing is written, neither then nor for the dry runs that crowded
// it out.
func TestDryRunReinvocationAfterEviction(t *testing.T) {
	w := &recordingWriter{}
	h := NewHandler(dryRunCluster(), WithSecretWriter(w))
	dry := true
	vm := dryRunVM("#cloud-config\n" + strings.Repeat("# padding to need a Secret\n", 100))
	req := vmRequest(admissionv1.Create, vm, "")
	req.UID, req.DryRun = "victim", &dry
	first := h.Handle(context.Background(), req)
	if !first.Allowed {
		t.Fatalf("first call: %s", first.Result.Message)
	}
	mutated := toJSON(applyPatch(t, []byte(vm), first.Patches))

	// Enough other dry runs to push it out.
	for i := range maxDryRunEntries {
		other := vmRequest(admissionv1.Create, vm, "")
		other.UID, other.DryRun = uidN(i), &dry
		if resp := h.Handle(context.Background(), other); !resp.Allowed {
			t.Fatalf("dry run %d: %s", i, resp.Result.Message)
		}
	}

	again := vmRequest(admissionv1.Create, mutated, "")
	again.UID, again.DryRun = "victim", &dry
	second := h.Handle(context.Background(), again)
	if second.Allowed || second.Result.Code != http.StatusTooManyRequests {
		t.Fatalf("reinvocation: allowed=%v code=%d %q; want 429", second.Allowed, second.Result.Code, second.Result.Message)
	}
	for _, want := range []string{"Secret ns/web-userdata", "not kept", "retry the dry run", "a real apply is not affected"} {
		if !strings.Contains(second.Result.Message, want) {
			t.Errorf("message %q does not say %q", second.Result.Message, want)
		}
	}
	if len(w.writes) != 0 {
		t.Errorf("dry runs wrote Secrets %v", w.writes)
	}
}
