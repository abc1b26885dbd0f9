package session

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Key names one session slot: a VM and a mode ("console", "vnc", "ssh").
type Key struct {
	Namespace, Name string
	Mode            string
	// VMI is the uid of the VMI the session reaches, which the caller has
	// read: it is recorded on the Lease (virtstation.io/vmi-uid). It is not
	// part of the slot's identity: a slot outlives a VM's restarts. (The
	// Lease cannot have the VMI as its owner: it lives in the bridge's
	// namespace, and owner references cannot cross namespaces.)
	VMI types.UID
}

// String reads like "console session of ns/vm".
func (k Key) String() string {
	return fmt.Sprintf("%s session of %s/%s", k.Mode, k.Namespace, k.Name)
}

// maxModeLength keeps Lease names short; modes are single words.
const maxModeLength = 30

// validate checks that k names a VM the API server could hold and a mode
// that fits in a Lease name.
func (k Key) validate() error {
	var problems []string
	if errs := validation.IsDNS1123Label(k.Namespace); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("namespace %q: %s", k.Namespace, strings.Join(errs, "; ")))
	}
	if errs := validation.IsDNS1123Subdomain(k.Name); len(errs) > 0 {
		problems = append(problems, fmt.Sprintf("name %q: %s", k.Name, strings.Join(errs, "; ")))
	}
	if errs := validation.IsDNS1123Label(k.Mode); len(errs) > 0 || len(k.Mode) > maxModeLength {
		problems = append(problems, fmt.Sprintf("mode %q: must be a lower-case word of at most %d characters", k.Mode, maxModeLength))
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid session key: %s", strings.Join(problems, ", "))
	}
	return nil
}

// vmHash identifies a VM in Lease names and labels: 16 hex digits of
// sha256("<ns>/<vm>"). Neither part can contain "/", so the input is
// unambiguous; 64 bits make a collision between two VMs negligible.
func vmHash(namespace, name string) string {
	sum := sha256.Sum256([]byte(namespace + "/" + name))
	return hex.EncodeToString(sum[:8])
}

// leaseName is the name of k's Lease: "vs-<mode>-<vmHash>", a DNS-1123
// label for every valid key.
func leaseName(k Key) string {
	return "vs-" + k.Mode + "-" + vmHash(k.Namespace, k.Name)
}

// heartbeatName is the name of the heartbeat Lease of the replica named
// replica: "vs-replica-<16 hex digits of sha256(replica)>", a DNS-1123
// label whatever the replica is called. It cannot be a session Lease's
// name: those hash "<ns>/<vm>", and a replica name has no "/".
func heartbeatName(replica string) string {
	sum := sha256.Sum256([]byte(replica))
	return "vs-replica-" + hex.EncodeToString(sum[:8])
}
