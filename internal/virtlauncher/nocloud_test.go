package virtlauncher

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

func TestNoCloudOfReadsEachSourceAsVirtLauncher(t *testing.T) {
	secrets := map[string]map[string][]byte{
		"ud":   {"userData": []byte("#cloud-config\nfrom: secret\n")},
		"nd":   {"networkdata": []byte("version: 2\n")},
		"keys": {"b": []byte("ssh-ed25519 BBBB b"), "a": []byte("ssh-ed25519 AAAA a")},
	}
	lookup := func(name string) (map[string][]byte, error) {
		if s, ok := secrets[name]; ok {
			return s, nil
		}
		return nil, errors.New("not found")
	}
	cases := map[string]struct {
		src       kubevirtv1.CloudInitNoCloudSource
		user, net string
		err       string
	}{
		"inline":           {src: kubevirtv1.CloudInitNoCloudSource{UserData: "#cloud-config\n"}, user: "#cloud-config\n"},
		"base64":           {src: kubevirtv1.CloudInitNoCloudSource{UserDataBase64: base64.StdEncoding.EncodeToString([]byte("#!/bin/sh\n"))}, user: "#!/bin/sh\n"},
		"secretRef":        {src: kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "ud"}, NetworkDataSecretRef: &corev1.LocalObjectReference{Name: "nd"}}, user: "#cloud-config\nfrom: secret\n", net: "version: 2\n"},
		"missing secret":   {src: kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "gone"}}, err: `Secret "gone"`},
		"secret lacks key": {src: kubevirtv1.CloudInitNoCloudSource{UserDataSecretRef: &corev1.LocalObjectReference{Name: "nd"}}, err: "none of the keys userdata, userData"},
		"empty":            {src: kubevirtv1.CloudInitNoCloudSource{}, err: "UserData or NetworkData is required"},
		"bad base64":       {src: kubevirtv1.CloudInitNoCloudSource{UserDataBase64: "!!"}, err: "userDataBase64"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			src := tc.src
			vmi := &kubevirtv1.VirtualMachineInstance{
				ObjectMeta: metav1.ObjectMeta{Name: "dev.alice", Namespace: "ws", Annotations: map[string]string{kubevirtv1.ClusterInstancetypeAnnotation: "u1.small"}},
				Spec: kubevirtv1.VirtualMachineInstanceSpec{
					Domain:  kubevirtv1.DomainSpec{Firmware: &kubevirtv1.Firmware{UUID: "uuid-1"}},
					Volumes: []kubevirtv1.Volume{{Name: "ci", VolumeSource: kubevirtv1.VolumeSource{CloudInitNoCloud: &src}}},
					AccessCredentials: []kubevirtv1.AccessCredential{{SSHPublicKey: &kubevirtv1.SSHPublicKeyAccessCredential{
						Source:            kubevirtv1.SSHPublicKeyAccessCredentialSource{Secret: &kubevirtv1.AccessCredentialSecretSource{SecretName: "keys"}},
						PropagationMethod: kubevirtv1.SSHPublicKeyAccessCredentialPropagationMethod{NoCloud: &kubevirtv1.NoCloudSSHPublicKeyAccessCredentialPropagation{}},
					}}},
				},
			}
			nc, ok, err := NoCloudOf(vmi, lookup)
			if !ok {
				t.Fatal("the cloudInitNoCloud volume was not found")
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(nc.UserData) != tc.user || string(nc.NetworkConfig) != tc.net || nc.Volume != "ci" {
				t.Errorf("user-data %q network-config %q volume %q", nc.UserData, nc.NetworkConfig, nc.Volume)
			}
			// KubeVirt's NoCloudMetadata: the firmware UUID, the name up to
			// its first dot, the instancetype, the keys numbered in name order.
			want := `{"instance-type":"u1.small","instance-id":"uuid-1","local-hostname":"dev","public-keys":{"0":"ssh-ed25519 AAAA a","1":"ssh-ed25519 BBBB b"}}`
			if string(nc.MetaData) != want {
				t.Errorf("meta-data %s, want %s", nc.MetaData, want)
			}
		})
	}
}

func TestAuthorizedKeysAsVirtLauncherReadsThem(t *testing.T) {
	s := &corev1.Secret{Data: map[string][]byte{
		"z":               []byte("ssh-ed25519 ZZZZ z\n"),
		"authorized_keys": []byte("  ssh-ed25519 AAAA a  \n\n\r\nssh-rsa BBBB b\n"),
	}}
	got := strings.Join(AuthorizedKeys(s), "|")
	if want := "ssh-ed25519 AAAA a|ssh-rsa BBBB b|ssh-ed25519 ZZZZ z"; got != want {
		t.Errorf("AuthorizedKeys = %q, want %q", got, want)
	}
}

// FuzzAuthorizedKeys: any Secret content gives trimmed, non-empty,
// single-line keys.
func FuzzAuthorizedKeys(f *testing.F) {
	f.Add([]byte("ssh-ed25519 AAAA a\nssh-rsa BBBB b\n"))
	f.Add([]byte("\r\n\n  \t\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, k := range AuthorizedKeys(&corev1.Secret{Data: map[string][]byte{"k": b}}) {
			if k == "" || k != strings.TrimSpace(k) || strings.Contains(k, "\n") {
				t.Fatalf("key %q", k)
			}
		}
	})
}
