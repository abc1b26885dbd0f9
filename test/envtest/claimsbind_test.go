package envtest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/claims"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/webhooks/validate"
)

// maxClaimGrace is the longest a claim whose VM is never stored may hold
// a disk in production (issue 27: seconds, not minutes).
const maxClaimGrace = 30 * time.Second

// releaseSlack is how long after its grace a lapsed claim may take to go:
// the Releaser looks again when the grace runs out, on a loaded machine.
const releaseSlack = 10 * time.Second

// forgedCount is how many forged creates TestForgedCreatesLeaveNoClaims
// sends.
const forgedCount = 50

// TestForgedCreatesLeaveNoClaims POSTs 50 AdmissionReviews of VM creates
// straight to the validating webhook's HTTPS endpoint, as a pod that
// reaches the webhook Service could: each claims a disk for a VM that is
// never stored. The webhook cannot tell them from the API server's, so it
// writes the claims, bound to the uids the forger made up; after the grace
// period no claim remains. The shipped grace is seconds.
func TestForgedCreatesLeaveNoClaims(t *testing.T) {
	if claims.DefaultGrace > maxClaimGrace {
		t.Errorf("claims.DefaultGrace = %s: a forged claim holds a disk that long in production, want at most %s", claims.DefaultGrace, maxClaimGrace)
	}
	ns := newNamespace(t, "forged")
	disks := make([]string, forgedCount)
	for i := range disks {
		disks[i] = fmt.Sprintf("disk-%d", i)
		createPVC(t, ns, disks[i], true)
	}
	for _, d := range disks {
		waitCached(t, pvcRef(ns, d))
	}
	uids := make([]types.UID, forgedCount)
	for i, d := range disks {
		vm := newVM(ns, fmt.Sprintf("ghost-%d", i), managed, withAnnotation(api.AnnotationDataDisks, d+":/data"))
		vm.UID = uuid.NewUUID()
		uids[i] = vm.UID
		if resp := postReview(t, validate.VMPath, admissionv1.Create, vm); !resp.Allowed {
			t.Fatalf("forged create %d refused (%+v): the test needs claims to be written", i, resp.Result)
		}
	}
	sent := time.Now()
	for i, d := range disks {
		s := claimState(t, pvcRef(ns, d))
		if want := fmt.Sprintf("%s/ghost-%d", ns, i); s.ClaimedBy != want || s.UID(want) != uids[i] {
			t.Fatalf("%s: claimed by %q with uid %q, want %s bound to the forged uid %s", d, s.ClaimedBy, s.UID(want), want, uids[i])
		}
	}
	eventually(t, testenv.ClaimGrace+releaseSlack, func() error {
		for _, d := range disks {
			if s := claimState(t, pvcRef(ns, d)); !s.Empty() {
				return fmt.Errorf("%s still claimed %s after the forged create: %+v", d, time.Since(sent).Round(time.Second), s)
			}
		}
		return nil
	})
}

// TestClaimOfAnotherUIDIsReleased: a claim written for VM ns/dev (a forged
// create, with a made-up uid) is released once its grace runs out even
// though a VM ns/dev then exists and attaches the disk: that VM has
// another uid, so it is not the holder. A claim bound to the stored VM's
// uid stays.
func TestClaimOfAnotherUIDIsReleased(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "uid")
	createPVC(t, ns, "home", true)
	createPVC(t, ns, "kept", true)
	waitCached(t, pvcRef(ns, "home"))
	waitCached(t, pvcRef(ns, "kept"))

	forged := newVM(ns, "dev", managed, withAnnotation(api.AnnotationDataDisks, "home:/home"))
	forged.UID = uuid.NewUUID()
	if resp := postReview(t, validate.VMPath, admissionv1.Create, forged); !resp.Allowed {
		t.Fatalf("forged create refused (%+v): the test needs its claim", resp.Result)
	}
	if s := claimState(t, pvcRef(ns, "home")); s.ClaimedBy != ns+"/dev" || s.UID(ns+"/dev") != forged.UID {
		t.Fatalf("home: %+v, want claimed by %s/dev bound to the forged uid", s, ns)
	}
	// The real ns/dev, not managed (it claims nothing itself), attaches
	// both disks.
	dev := newVM(ns, "dev", attaching("pvc:home", "pvc:kept"))
	if err := env.Client.Create(ctx, dev); err != nil {
		t.Fatal(err)
	}
	claimDisk(t, pvcRef(ns, "kept"), "dev", false, time.Now(), claims.WithUID(dev.UID))

	eventually(t, testenv.ClaimGrace+releaseSlack, func() error {
		if s := claimState(t, pvcRef(ns, "home")); !s.Empty() {
			return fmt.Errorf("home still claimed: %+v (stored %s/dev has uid %s)", s, ns, dev.UID)
		}
		return nil
	})
	if s := claimState(t, pvcRef(ns, "kept")); s.ClaimedBy != ns+"/dev" || s.UID(ns+"/dev") != dev.UID {
		t.Errorf("kept: %+v, want it still claimed by %s/dev with its uid %s", s, ns, dev.UID)
	}
}
