package api

import (
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// SSH key propagation methods (virtstation.io/ssh-propagation).
const (
	// PropagationQemuGuestAgent: KubeVirt's accessCredentials through the
	// guest agent; keys apply live. The default.
	PropagationQemuGuestAgent = "qemuGuestAgent"
	// PropagationCloudInit: ssh_authorized_keys in the cloud-config part;
	// applied by cloud-init on the first boot only.
	PropagationCloudInit = "cloudInit"
)

// guestUser is a portable Linux account name (useradd's default rule).
var guestUser = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)

// SSHSetting is the parsed SSH-key annotations of a VM.
type SSHSetting struct {
	// User is empty when no keys are wanted.
	User        string
	Propagation string
}

// ParseSSH reads virtstation.io/ssh-user and virtstation.io/ssh-propagation.
func ParseSSH(annotations map[string]string, fld *field.Path) (SSHSetting, field.ErrorList) {
	s := SSHSetting{User: annotations[AnnotationSSHUser], Propagation: annotations[AnnotationSSHPropagation]}
	var errs field.ErrorList
	if s.Propagation == "" {
		s.Propagation = PropagationQemuGuestAgent
	}
	if s.Propagation != PropagationQemuGuestAgent && s.Propagation != PropagationCloudInit {
		errs = append(errs, field.NotSupported(fld.Key(AnnotationSSHPropagation), s.Propagation, []string{PropagationQemuGuestAgent, PropagationCloudInit}))
	}
	if s.User != "" && !guestUser.MatchString(s.User) {
		errs = append(errs, field.Invalid(fld.Key(AnnotationSSHUser), s.User, "want a Linux account name: lower-case letters, digits, _ and -, starting with a letter or _, at most 32 characters"))
	}
	return s, errs
}
