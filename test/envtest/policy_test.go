package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cdiv1beta1 "kubevirt.io/containerized-data-importer-api/pkg/apis/core/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/internal/testenv"
)

func TestShippedRulesDenyAndAdmit(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "rules")
	createPVC(t, ns, "data", true)
	waitCached(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}})
	cases := map[string]struct {
		bad, fixed []vmOption
		want       []string
	}{
		"mount-path": {
			bad:   []vmOption{withAnnotation(api.AnnotationDataDisks, "data:/etc/app")},
			fixed: []vmOption{withAnnotation(api.AnnotationDataDisks, "data:/srv/app")},
			want:  []string{"metadata.annotations[virtstation.io/data-disks][0].mountPath", "rule: mount-path", "fix:"},
		},
		"shared-memory": {
			bad:  []vmOption{withAnnotation(api.AnnotationSharedMemory, "1Gi")},
			want: []string{"metadata.annotations[virtstation.io/shared-memory]", "rule: shared-memory", "shared memory"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			bad := newVM(ns, name+"-bad", append([]vmOption{managed}, tc.bad...)...)
			err := env.Client.Create(ctx, bad)
			if err == nil {
				t.Fatal("bad VM admitted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("denial %q lacks %q", err, w)
				}
			}
			if apierrors.IsInternalError(err) {
				t.Errorf("denial is a 500: %v", err)
			}
			fixed := newVM(ns, name+"-fixed", append([]vmOption{managed}, tc.fixed...)...)
			if err := env.Client.Create(ctx, fixed); err != nil {
				t.Fatalf("fixed VM: %v", err)
			}
			if fixed.Annotations[api.AnnotationPolicyRevision] == "" {
				t.Error("admitted VM has no policy revision annotation")
			}
		})
	}
}

// raceForDisks creates n VMs at once, VM i claiming disk i%len(disks), and
// returns the admitted VM names per disk and the denials.
func raceForDisks(t *testing.T, ns string, disks []string, n int) (map[string][]string, []error) {
	t.Helper()
	var (
		mu      sync.Mutex
		winners = map[string][]string{}
		denials []error
		wg      sync.WaitGroup
	)
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			disk := disks[i%len(disks)]
			vm := newVM(ns, fmt.Sprintf("racer-%d", i), managed, withAnnotation(api.AnnotationDataDisks, disk+":/data"))
			<-start
			err := env.Client.Create(context.Background(), vm)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				winners[disk] = append(winners[disk], vm.Name)
			} else {
				denials = append(denials, err)
			}
		}(i)
	}
	close(start)
	wg.Wait()
	return winners, denials
}

func claimOf(ctx context.Context, t *testing.T, ns, disk string) claims.State {
	t.Helper()
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: disk}, &pvc); err != nil {
		t.Fatal(err)
	}
	return claims.Read(&pvc)
}

// TestClaimRace: many VMs racing for one disk through the API server, at
// once: exactly one wins, the others are denied naming it.
func TestClaimRace(t *testing.T) {
	for round := 0; round < 3; round++ {
		ns := newNamespace(t, "race")
		createPVC(t, ns, "shared", true)
		waitCached(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shared"}})
		winners, denials := raceForDisks(t, ns, []string{"shared"}, 50)
		if len(winners["shared"]) != 1 {
			for i, e := range denials {
				if i < 3 {
					t.Log(e)
				}
			}
			t.Fatalf("round %d: %d winners %v, want exactly 1", round, len(winners["shared"]), winners["shared"])
		}
		winner := ns + "/" + winners["shared"][0]
		for _, err := range denials {
			if !strings.Contains(err.Error(), winner) && !strings.Contains(err.Error(), "try again") {
				t.Fatalf("round %d: denial does not name the winner %s: %v", round, winner, err)
			}
		}
		if got := claimOf(context.Background(), t, ns, "shared").ClaimedBy; got != winner {
			t.Fatalf("round %d: disk claimed by %q, want %q", round, got, winner)
		}
	}
	ns := newNamespace(t, "race10")
	var disks []string
	for i := 0; i < 10; i++ {
		disks = append(disks, fmt.Sprintf("disk-%d", i))
		createPVC(t, ns, disks[i], true)
	}
	waitCached(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "disk-9"}})
	winners, _ := raceForDisks(t, ns, disks, 100)
	for _, d := range disks {
		if len(winners[d]) != 1 {
			t.Fatalf("%s: winners %v, want exactly 1", d, winners[d])
		}
		if got := claimOf(context.Background(), t, ns, d).ClaimedBy; got != ns+"/"+winners[d][0] {
			t.Fatalf("%s claimed by %q, want %s", d, got, winners[d][0])
		}
	}
}

// TestClaimReleaseAndDeletionGuard: a claimed disk cannot be deleted; the
// claim goes with its VM, and then another VM can take the disk.
func TestClaimReleaseAndDeletionGuard(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "release")
	createDataVolume(t, ns, "home")
	waitCached(t, &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home"}})
	first := newVM(ns, "first", managed, withAnnotation(api.AnnotationDataDisks, "home:/home"))
	if err := env.Client.Create(ctx, first); err != nil {
		t.Fatal(err)
	}
	waitCached(t, first)
	second := newVM(ns, "second", managed, withAnnotation(api.AnnotationDataDisks, "home:/home"))
	if err := env.Client.Create(ctx, second.DeepCopy()); err == nil || !strings.Contains(err.Error(), ns+"/first") {
		t.Fatalf("second claim: err = %v, want a denial naming %s/first", err, ns)
	}
	dv := &cdiv1beta1.DataVolume{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "home"}}
	if err := env.Client.Delete(ctx, dv); err == nil || !strings.Contains(err.Error(), "first") {
		t.Fatalf("deleting the claimed DataVolume: err = %v, want a denial naming the VM", err)
	}
	if err := env.Client.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, func() error {
		var got cdiv1beta1.DataVolume
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(dv), &got); err != nil {
			return err
		}
		if c := claims.Read(&got); c.ClaimedBy != "" {
			return fmt.Errorf("still claimed by %s", c.ClaimedBy)
		}
		return nil
	})
	eventually(t, 10*time.Second, func() error { return env.Client.Create(ctx, second.DeepCopy()) })
}

// TestEnforcementModes: a rule in warn mode admits with a warning; in dryrun
// mode it admits silently.
func TestEnforcementModes(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "modes")
	setModes(t, map[string]string{"shared-memory": "warn"})
	c, warnings := newClient(t)
	eventually(t, 20*time.Second, func() error {
		vm := newVM(ns, fmt.Sprintf("warned-%d", time.Now().UnixNano()), managed, withAnnotation(api.AnnotationSharedMemory, "1Gi"))
		if err := c.Create(ctx, vm); err != nil {
			return err
		}
		return containsAny(warnings.Take(), "shared-memory")
	})
	setModes(t, map[string]string{"shared-memory": "dryrun"})
	eventually(t, 20*time.Second, func() error {
		warnings.Take()
		vm := newVM(ns, fmt.Sprintf("silent-%d", time.Now().UnixNano()), managed, withAnnotation(api.AnnotationSharedMemory, "1Gi"))
		if err := c.Create(ctx, vm); err != nil {
			return err
		}
		if w := warnings.Take(); containsAny(w, "shared-memory") == nil {
			return fmt.Errorf("dryrun mode still warns: %q", w)
		}
		return nil
	})
	setModes(t, map[string]string{})
	eventually(t, 20*time.Second, func() error {
		vm := newVM(ns, fmt.Sprintf("denied-%d", time.Now().UnixNano()), managed, withAnnotation(api.AnnotationSharedMemory, "1Gi"))
		if err := c.Create(ctx, vm); err == nil {
			return fmt.Errorf("deny mode admitted %s", vm.Name)
		}
		return nil
	})
}

func setModes(t *testing.T, modes map[string]string) {
	t.Helper()
	if err := applyModes(context.Background(), modes); err != nil {
		t.Fatal(err)
	}
}

// TestOperatorPolicy: broken Rego is rejected at apply time with the
// compiler's message; a valid policy takes effect without a restart.
func TestOperatorPolicy(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "operator")
	broken := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.InstallNamespace, Name: "broken-policy", Labels: map[string]string{api.LabelPolicy: api.LabelTrue}},
		Data:       map[string]string{"broken.rego": "package virtstation.rules.broken\n\ndeny contains v if {\n  v := \n}\n"},
	}
	err := env.Client.Create(ctx, broken)
	if err == nil || !strings.Contains(err.Error(), "broken.rego:") {
		t.Fatalf("broken Rego: err = %v, want a denial with the compiler's file:line", err)
	}

	limit := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.InstallNamespace, Name: "disk-limit", Labels: map[string]string{api.LabelPolicy: api.LabelTrue}},
		Data: map[string]string{
			"disk_limit.rego": `package virtstation.rules.disk_limit

deny contains {"id": "disk-limit", "field": "metadata.annotations[virtstation.io/data-disks]", "message": msg} if {
	count(input.dataDisks) > 4
	msg := sprintf("%d data disks, at most 4 are allowed (rule: disk-limit; fix: attach fewer disks)", [count(input.dataDisks)])
}
`,
			"disk_limit_test.rego": `package virtstation.rules.disk_limit_test

import data.virtstation.rules.disk_limit

test_five_disks_denied if {
	count(disk_limit.deny) == 1 with input as {"dataDisks": [{}, {}, {}, {}, {}]}
}

test_four_disks_allowed if {
	count(disk_limit.deny) == 0 with input as {"dataDisks": [{}, {}, {}, {}]}
}
`,
		},
	}
	if err := env.Client.Create(ctx, limit); err != nil {
		t.Fatalf("valid operator policy rejected: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), limit) })
	var names []string
	for i := 0; i < 5; i++ {
		names = append(names, fmt.Sprintf("d%d", i))
		createPVC(t, ns, names[i], true)
	}
	waitCached(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d4"}})
	var spec []string
	for _, n := range names {
		spec = append(spec, n+":/"+n)
	}
	eventually(t, 20*time.Second, func() error {
		vm := newVM(ns, fmt.Sprintf("many-%d", time.Now().UnixNano()), managed, withAnnotation(api.AnnotationDataDisks, strings.Join(spec, ",")))
		err := env.Client.Create(ctx, vm)
		if err == nil {
			_ = env.Client.Delete(ctx, vm)
			return fmt.Errorf("5 disks admitted")
		}
		if !strings.Contains(err.Error(), "rule: disk-limit") {
			return fmt.Errorf("denied, but not by disk-limit: %w", err)
		}
		return nil
	})
}
