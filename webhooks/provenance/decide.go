package provenance

import (
	"encoding/json"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Object is the identity of a VirtualMachine: what a request's oldObject
// says, or what the API server holds.
type Object struct {
	UID             types.UID
	ResourceVersion string
}

// Verdict is why a request cannot be acted on; the zero Verdict means it
// can.
type Verdict int

// Verdicts.
const (
	// Genuine: the request agrees with the API server.
	Genuine Verdict = iota
	// Exists: a CREATE names a VM that already exists.
	Exists
	// Stale: an UPDATE's oldObject is not the stored VM (another UID, an
	// older or newer resourceVersion, or no VM at all).
	Stale
)

// Decide compares a request with the stored VM (nil when none exists). It
// is pure: the caller reads stored from the API server, never from a cache,
// which may lag.
func Decide(op admissionv1.Operation, old *Object, stored *Object) Verdict {
	switch op {
	case admissionv1.Create:
		if stored != nil {
			return Exists
		}
	case admissionv1.Update:
		if old == nil || stored == nil || old.UID == "" || old.UID != stored.UID || old.ResourceVersion != stored.ResourceVersion {
			return Stale
		}
	}
	return Genuine
}

// Message is what the requester is told for a verdict on VM key.
func (v Verdict) Message(key types.NamespacedName) string {
	switch v {
	case Exists:
		return fmt.Sprintf("virtualmachines.kubevirt.io %q already exists in namespace %q; virtstation wrote nothing for this create (fix: update the existing VM, or choose another name)", key.Name, key.Namespace)
	case Stale:
		return fmt.Sprintf("VirtualMachine %s is not the object this request was admitted against (it changed, or the request is stale); virtstation wrote nothing (fix: try again)", key)
	}
	return ""
}

// Identity reads an object's UID and resourceVersion from its raw JSON (a
// request's oldObject); nil when raw is empty.
func Identity(raw []byte) (*Object, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var obj struct {
		Metadata struct {
			UID             types.UID `json:"uid"`
			ResourceVersion string    `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("decode old object metadata: %w", err)
	}
	return &Object{UID: obj.Metadata.UID, ResourceVersion: obj.Metadata.ResourceVersion}, nil
}
