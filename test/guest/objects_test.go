package guest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/virtstation/virtstation/internal/virtlauncher"
)

func objectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

// create applies each YAML document as the test's administrator.
func create(t *testing.T, docs ...string) {
	t.Helper()
	for _, doc := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if err := env.Client.Create(context.Background(), u); err != nil {
			t.Fatalf("create %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// keySecret is a namespace's SSH public key Secret.
func keySecret(namespace, name string, keys ...string) string {
	return `apiVersion: v1
kind: Secret
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
  labels:
    virtstation.io/ssh-public-key: "true"
stringData:
  authorized_keys: "` + strings.Join(keys, `\n`) + `\n"
`
}

// blankDataVolume is a data disk DataVolume with a blank source.
func blankDataVolume(namespace, name, size string) string {
	return `apiVersion: cdi.kubevirt.io/v1beta1
kind: DataVolume
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
  labels:
    virtstation.io/data-disk: "true"
spec:
  source:
    blank: {}
  storage:
    resources:
      requests:
        storage: ` + size + `
`
}

// dataPVC is a data disk PVC.
func dataPVC(namespace, name, size string) string {
	return `apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
  labels:
    virtstation.io/data-disk: "true"
spec:
  accessModes: [ReadWriteOnce]
  resources:
    requests:
      storage: ` + size + `
`
}

// ext4Claim writes claim's image as an ext4 filesystem holding files, as
// a disk a user brings along.
func ext4Claim(t *testing.T, namespace, claim string, files map[string]string) {
	t.Helper()
	src := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img := virtlauncher.ClaimImage(storage, namespace, claim)
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-L", claim, "-d", src, img, "64M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4 (Debian package e2fsprogs): %v: %s", err, out)
	}
}

// partitionedClaim writes claim's image with a GPT and one partition.
func partitionedClaim(t *testing.T, namespace, claim string) {
	t.Helper()
	img := virtlauncher.ClaimImage(storage, namespace, claim)
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 64<<20); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sfdisk", "--quiet", img)
	cmd.Stdin = strings.NewReader("label: gpt\n,,L\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk (Debian package fdisk): %v: %s", err, out)
	}
}
