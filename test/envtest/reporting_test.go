package envtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/sshkeys"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/webhooks/mutate"
)

// withUserData gives the VM a NoCloud volume with the user's inline
// user-data.
func withUserData(data string) vmOption {
	return withCloudInit(kubevirtv1.CloudInitNoCloudSource{UserData: data})
}

// TestInvalidCloudConfigWarns (issue 13, finding 9): a user #cloud-config
// that is not YAML is admitted, as KubeVirt admits it, but kubectl shows a
// warning naming the field and the YAML error's line.
func TestInvalidCloudConfigWarns(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "cloudconfig")
	createKeySecret(t, ns, "team", newPublicKey(t, "alice")+"\n")
	own := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "my-userdata"},
		Data:       map[string][]byte{"userdata": []byte("#cloud-config\npackages:\n  - git\n - vim\n")},
	}
	if err := env.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	keysByCloudInit := []vmOption{managed, withAnnotation(api.AnnotationSSHUser, "alice"), withAnnotation(api.AnnotationSSHPropagation, api.PropagationCloudInit)}
	for name, tc := range map[string]struct {
		vm   string
		opts []vmOption
		want []string // substrings of one warning
	}{
		"inline, merged with Virtstation's part": {
			vm:   "inline-merged",
			opts: append(keysByCloudInit, withUserData("#cloud-config\nruncmd:\n\t- echo hi\n")),
			want: []string{"spec.template.spec.volumes[1].cloudInitNoCloud.userData", "line 3: found character that cannot start any token", "cloud-init will likely ignore"},
		},
		"in the user's Secret": {
			vm:   "user-secret",
			opts: append(keysByCloudInit, withCloudInit(kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: own.Name}})),
			want: []string{"spec.template.spec.volumes[1].cloudInitNoCloud.secretRef.name (Secret my-userdata)", "line 3: ", "cloud-init will likely ignore"},
		},
		"inline, nothing of Virtstation's to merge": {
			vm:   "inline-alone",
			opts: []vmOption{managed, withUserData("#cloud-config\npackages: [git, vim\nruncmd: []\n")},
			want: []string{"spec.template.spec.volumes[1].cloudInitNoCloud.userData", "line 2: did not find expected ',' or ']'"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			c, warnings := newClient(t)
			vm := newVM(ns, tc.vm, tc.opts...)
			if err := c.Create(ctx, vm); err != nil {
				t.Fatalf("create: %v (the VM must be admitted)", err)
			}
			got := warnings.Take()
			for _, w := range got {
				if containsAll(w, tc.want) {
					return
				}
			}
			t.Fatalf("warnings %q, want one containing all of %q", got, tc.want)
		})
	}

	t.Run("valid cloud-config gets no warning", func(t *testing.T) {
		c, warnings := newClient(t)
		vm := newVM(ns, "valid", append(keysByCloudInit, withUserData("#cloud-config\npackages: [git]\n"))...)
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		for _, w := range warnings.Take() {
			if strings.Contains(w, "cloud-config") {
				t.Errorf("unexpected warning %q", w)
			}
		}
	})
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// TestSweeperRemovesOrphanedSecrets (issue 13, finding 10): a Secret the
// mutating webhook wrote for an admission that a later step rejected is
// deleted after the grace period; a Secret whose VM exists is kept.
func TestSweeperRemovesOrphanedSecrets(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "sweep")

	// A VM exists; a Secret named after it, Virtstation's, without an
	// owner (nothing adopts it: the VM does not refer to it).
	kept := newVM(ns, "kept", managed)
	if err := env.Client.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	keptSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
		Namespace: ns, Name: mutate.UserDataSecretName(kept.Name),
		Labels: map[string]string{api.LabelManagedBy: api.ManagedByValue},
	}}
	if err := env.Client.Create(ctx, keptSecret); err != nil {
		t.Fatal(err)
	}

	// The mutating webhook creates the keys Secret of a guest-agent VM,
	// then the validating webhook denies the VM (shared memory).
	rejected := newVM(ns, "rejected", managed, withAnnotation(api.AnnotationSSHUser, "dev"), withAnnotation(api.AnnotationSharedMemory, "1Gi"))
	err := env.Client.Create(ctx, rejected)
	if err == nil || !strings.Contains(err.Error(), "shared-memory") {
		t.Fatalf("create = %v, want the shared-memory policy to deny it", err)
	}
	orphanKey := client.ObjectKey{Namespace: ns, Name: sshkeys.SecretName(rejected.Name)}
	var orphan corev1.Secret
	if err := env.Client.Get(ctx, orphanKey, &orphan); err != nil {
		t.Fatalf("get %s: %v; the rejected admission should have left it (the premise of this test)", orphanKey, err)
	}
	written := orphan.CreationTimestamp.Time

	// Not before the grace (creationTimestamp has a resolution of 1 s).
	time.Sleep(time.Until(written.Add(testenv.SweepGrace - 2*time.Second)))
	if err := env.Client.Get(ctx, orphanKey, &corev1.Secret{}); err != nil {
		t.Fatalf("orphan swept before the grace of %s: %v", testenv.SweepGrace, err)
	}
	// Gone within grace + period, with slack for a loaded machine.
	eventually(t, testenv.SweepGrace+testenv.SweepEvery+10*time.Second, func() error {
		switch err := env.Client.Get(ctx, orphanKey, &corev1.Secret{}); {
		case apierrors.IsNotFound(err):
			return nil
		case err != nil:
			return err
		default:
			return fmt.Errorf("orphan %s still there %s after it was written", orphanKey, time.Since(written).Round(time.Second))
		}
	})
	if gone := time.Since(written); gone < testenv.SweepGrace {
		t.Errorf("orphan swept %s after it was written, before the grace of %s", gone, testenv.SweepGrace)
	}

	// The kept Secret is older than the orphan, so the sweeps that took
	// the orphan saw it too.
	var after corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(keptSecret), &after); err != nil {
		t.Fatalf("secret of an existing VM swept: %v", err)
	}
}
