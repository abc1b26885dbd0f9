package mutate

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/sshkeys"
)

// checkSecretNames denies an admission whose per-VM Secrets would have
// names the API server refuses: a VM name longer than 244 characters leaves
// no room for the suffix within the 253 a Secret name may have. The names
// are derived from the VM's name alone (by the webhook and the
// reconcilers that write them), so a shortened, hashed name
// would leave those unable to find the Secret again; the user gets the
// limit and the fix instead.
func checkSecretNames(m *mutation) error {
	var names []string
	if m.injected.SSHKeys != nil && m.injected.SSHKeys.Secret != "" {
		names = append(names, m.injected.SSHKeys.Secret)
	}
	if m.injected.CloudInit != nil && m.injected.CloudInit.Secret != "" {
		names = append(names, m.injected.CloudInit.Secret)
	}
	for _, name := range names {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			m.denied = append(m.denied, field.Invalid(field.NewPath("metadata", "name"), m.in.Name, secretNameDetail(m.in.Name, name)))
			return nil
		}
	}
	return nil
}

// maxVMNameForSecrets is the longest VM name whose per-VM Secret names
// are valid: 253 less the longest suffix.
var maxVMNameForSecrets = validation.DNS1123SubdomainMaxLength - max(len(UserDataSecretName("")), len(sshkeys.SecretName("")))

// secretNameDetail explains a refused per-VM Secret name.
func secretNameDetail(vm, secret string) string {
	return policy.Explain(fmt.Sprintf("Virtstation keeps this VM's data in a Secret named after it (<name>%s, %d characters), over the %d a Secret name may have",
		strings.TrimPrefix(secret, vm), len(secret), validation.DNS1123SubdomainMaxLength),
		policy.RuleSecrets, fmt.Sprintf("shorten the VM's name to at most %d characters", maxVMNameForSecrets))
}
