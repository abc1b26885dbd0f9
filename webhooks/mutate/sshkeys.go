package mutate

import (
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/sshkeys"
)

var pathAccessCredentials = []string{"spec", "template", "spec", "accessCredentials"}

// setSSHKeys gives the namespace's SSH public keys to virtstation.io/ssh-user:
// through KubeVirt's accessCredentials and the per-VM Secret <vm>-ssh-keys
// (qemuGuestAgent; keys apply live, the sshkeys reconciler writes the
// Secret), or in the cloud-config part of the user-data Secret (cloudInit;
// first boot only; the userdata reconciler writes it). The webhook reads no
// key: keys are Secret data.
func setSSHKeys(m *mutation) error {
	setting, errs := api.ParseSSH(m.in.VM.Annotations, field.NewPath("metadata", "annotations"))
	if len(errs) > 0 {
		m.deny(errs, policy.RuleSSHKeys, "set ssh-user to a guest account and ssh-propagation to qemuGuestAgent or cloudInit")
		return nil
	}
	m.sshUser = setting.User
	if m.in.VM.Spec.Template == nil {
		return nil
	}
	secretName := sshkeys.SecretName(m.in.Name)
	guestAgent := setting.User != "" && setting.Propagation != api.PropagationCloudInit
	// Ours are the entries exactly as this webhook writes them, for the
	// user it recorded or the one it would write now; any other entry is
	// the user's, even when it sources the same Secret.
	var ourUsers []string
	for _, rec := range []api.Injected{m.prev, m.oldInjected()} {
		if rec.SSHKeys != nil && rec.SSHKeys.Secret == secretName {
			ourUsers = append(ourUsers, rec.SSHKeys.User)
		}
	}
	if guestAgent {
		ourUsers = append(ourUsers, setting.User)
	}
	creds, removed := withoutOurCredentials(m.vm.Spec.Template.Spec.AccessCredentials, secretName, ourUsers)
	if guestAgent && m.in.Name != "" {
		if i := sourcing(creds, secretName); i >= 0 {
			m.denied = append(m.denied, field.Forbidden(field.NewPath("spec", "template", "spec", "accessCredentials").Index(i).Child("sshPublicKey", "source", "secret", "secretName"), policy.Explain(
				fmt.Sprintf("this entry sources Secret %s, which Virtstation writes with the namespace's keys for %s=%s", secretName, api.AnnotationSSHUser, setting.User),
				policy.RuleSSHKeys, "remove this entry and let Virtstation add its own, or source a Secret of another name")))
			return nil
		}
	}
	if setting.User == "" {
		if removed {
			m.writeCredentials(creds)
		}
		return nil
	}
	rec := &api.InjectedSSHKeys{User: setting.User, Propagation: setting.Propagation}
	switch setting.Propagation {
	case api.PropagationCloudInit:
		// The keys are Secret data: the userdata reconciler puts them in
		// the cloud-config part of the VM's user-data Secret.
		m.keysInCloudInit = true
		if removed {
			m.writeCredentials(creds)
		}
	default:
		if m.in.Name == "" {
			m.warnings = append(m.warnings, "virtstation: SSH keys not set up: the keys Secret is named after the VM, and a VM created with generateName has no name yet; apply it again once named")
			return nil
		}
		m.writeCredentials(append(creds, ourCredential(secretName, setting.User)))
		// The sshkeys reconciler writes the Secret from the stored VM; the
		// VM's first start waits for it (KubeVirt mounts it).
		rec.Secret = secretName
	}
	m.injected.SSHKeys = rec
	return nil
}

func (m *mutation) writeCredentials(creds []kubevirtv1.AccessCredential) {
	if len(creds) == 0 {
		creds = nil
	}
	m.vm.Spec.Template.Spec.AccessCredentials = creds
}

// ourCredential is the accessCredentials entry the webhook writes.
func ourCredential(secretName, user string) kubevirtv1.AccessCredential {
	return kubevirtv1.AccessCredential{SSHPublicKey: &kubevirtv1.SSHPublicKeyAccessCredential{
		Source: kubevirtv1.SSHPublicKeyAccessCredentialSource{Secret: &kubevirtv1.AccessCredentialSecretSource{SecretName: secretName}},
		PropagationMethod: kubevirtv1.SSHPublicKeyAccessCredentialPropagationMethod{
			QemuGuestAgent: &kubevirtv1.QemuGuestAgentSSHPublicKeyAccessCredentialPropagation{Users: []string{user}},
		},
	}}
}

// withoutOurCredentials drops the accessCredentials entries equal to
// ourCredential(secretName, u) for one of users; removed says whether
// there were any.
func withoutOurCredentials(creds []kubevirtv1.AccessCredential, secretName string, users []string) ([]kubevirtv1.AccessCredential, bool) {
	out := make([]kubevirtv1.AccessCredential, 0, len(creds))
	removed := false
	for _, c := range creds {
		if slices.ContainsFunc(users, func(u string) bool { return reflect.DeepEqual(c, ourCredential(secretName, u)) }) {
			removed = true
			continue
		}
		out = append(out, c)
	}
	return out, removed
}

// sourcing is the index of the first entry sourcing Secret secretName, or -1.
func sourcing(creds []kubevirtv1.AccessCredential, secretName string) int {
	for i, c := range creds {
		if k := c.SSHPublicKey; k != nil && k.Source.Secret != nil && k.Source.Secret.SecretName == secretName {
			return i
		}
	}
	return -1
}
