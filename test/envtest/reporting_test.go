package envtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/sshkeys"
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

// TestRejectedAdmissionLeavesNoSecret (issue 27): the webhooks write no
// Secret, so an admission that a later step rejects leaves nothing behind
// to sweep. The keys Secret of a guest-agent VM appears only once the VM is
// stored, written by the reconciler.
func TestRejectedAdmissionLeavesNoSecret(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, "rejected")

	rejected := newVM(ns, "rejected", managed, withAnnotation(api.AnnotationSSHUser, "dev"), withAnnotation(api.AnnotationSharedMemory, "1Gi"))
	err := env.Client.Create(ctx, rejected)
	if err == nil || !strings.Contains(err.Error(), "shared-memory") {
		t.Fatalf("create = %v, want the shared-memory policy to deny it", err)
	}
	stored := newVM(ns, "stored", managed, withAnnotation(api.AnnotationSSHUser, "dev"))
	if err := env.Client.Create(ctx, stored); err != nil {
		t.Fatal(err)
	}
	// The stored VM's Secret is written by the reconciler; by then the
	// rejected one would have been written too, were anything to write it.
	eventually(t, 30*time.Second, func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: sshkeys.SecretName(stored.Name)}, &corev1.Secret{})
	})
	var list corev1.SecretList
	if err := env.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if s.Name != sshkeys.SecretName(stored.Name) {
			t.Errorf("Secret %s exists; only the stored VM's keys Secret should", s.Name)
		}
		if ref := metav1.GetControllerOf(&s); ref == nil || ref.UID != stored.UID {
			t.Errorf("Secret %s is not controlled by VM %s (uid %s): %v", s.Name, stored.Name, stored.UID, s.OwnerReferences)
		}
	}
}
