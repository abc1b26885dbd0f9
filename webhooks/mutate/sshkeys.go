package mutate

import (
	"fmt"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/sshkeys"
)

var pathAccessCredentials = []string{"spec", "template", "spec", "accessCredentials"}

// setSSHKeys gives the namespace's SSH public keys to virtstation.io/ssh-user:
// through KubeVirt's accessCredentials and the per-VM Secret <vm>-ssh-keys
// (qemuGuestAgent; keys apply live, a reconciler keeps the Secret in sync),
// or in the cloud-config part (cloudInit; first boot only).
func setSSHKeys(m *mutation) error {
	setting, errs := api.ParseSSH(m.in.VM.Annotations, field.NewPath("metadata", "annotations"))
	if len(errs) > 0 {
		m.deny(errs, api.RuleSSHKeys, "set ssh-user to a guest account and ssh-propagation to qemuGuestAgent or cloudInit")
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
	creds, removed := withoutOurCredentials(getList(m.obj, pathAccessCredentials), secretName, ourUsers)
	if guestAgent && m.in.Name != "" {
		if i := sourcing(creds, secretName); i >= 0 {
			m.denied = append(m.denied, field.Forbidden(field.NewPath("spec", "template", "spec", "accessCredentials").Index(i).Child("sshPublicKey", "source", "secret", "secretName"), fmt.Sprintf(
				"this entry sources Secret %s, which Virtstation writes with the namespace's keys for %s=%s (rule: ssh-keys; fix: remove this entry and let Virtstation add its own, or source a Secret of another name)",
				secretName, api.AnnotationSSHUser, setting.User)))
			return nil
		}
	}
	if setting.User == "" {
		if removed {
			return m.writeCredentials(creds)
		}
		return nil
	}
	keys, err := m.cluster.SSHKeys(m.ctx, m.in.Namespace)
	if err != nil {
		return fmt.Errorf("read ssh keys: %w", err)
	}
	rec := &api.InjectedSSHKeys{User: setting.User, Propagation: setting.Propagation}
	switch setting.Propagation {
	case api.PropagationCloudInit:
		m.cloudInitKeys = keys
		rec.Keys = len(keys)
		if len(keys) == 0 {
			m.warnings = append(m.warnings, fmt.Sprintf("virtstation: no valid SSH keys in Secrets labelled %s=true in namespace %s; cloud-init gets none", api.LabelSSHPublicKey, m.in.Namespace))
		}
		if removed {
			if err := m.writeCredentials(creds); err != nil {
				return err
			}
		}
	default:
		if m.in.Name == "" {
			m.warnings = append(m.warnings, "virtstation: SSH keys not set up: the keys Secret is named after the VM, and a VM created with generateName has no name yet; apply it again once named")
			return nil
		}
		creds = append(creds, ourCredential(secretName, setting.User))
		if err := m.writeCredentials(creds); err != nil {
			return err
		}
		// The Secret must exist before the VM's first start; the webhook
		// creates it (never overwrites it) and the reconciler owns it after.
		vm := &kubevirtv1.VirtualMachine{}
		vm.Namespace, vm.Name = m.in.Namespace, m.in.Name
		m.secrets = append(m.secrets, SecretWrite{Secret: sshkeys.Desired(vm, keys), CreateOnly: true})
		rec.Secret = secretName
	}
	m.injected.SSHKeys = rec
	return nil
}

func (m *mutation) writeCredentials(creds []any) error {
	if len(creds) == 0 {
		unstructuredRemove(m.obj, pathAccessCredentials)
		return nil
	}
	return setList(m.obj, creds, pathAccessCredentials)
}

// ourCredential is the accessCredentials entry the webhook writes.
func ourCredential(secretName, user string) map[string]any {
	return map[string]any{
		"sshPublicKey": map[string]any{
			"source":            map[string]any{"secret": map[string]any{"secretName": secretName}},
			"propagationMethod": map[string]any{"qemuGuestAgent": map[string]any{"users": []any{user}}},
		},
	}
}

// withoutOurCredentials drops the accessCredentials entries equal to
// ourCredential(secretName, u) for one of users; removed says whether
// there were any.
func withoutOurCredentials(creds []any, secretName string, users []string) ([]any, bool) {
	out := make([]any, 0, len(creds))
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
func sourcing(creds []any, secretName string) int {
	for i, c := range creds {
		o, _ := c.(map[string]any)
		key, _ := o["sshPublicKey"].(map[string]any)
		src, _ := key["source"].(map[string]any)
		sec, _ := src["secret"].(map[string]any)
		if str(sec["secretName"]) == secretName {
			return i
		}
	}
	return -1
}
