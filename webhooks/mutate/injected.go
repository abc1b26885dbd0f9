package mutate

import (
	"encoding/json"
	"fmt"
)

// Injected is the record of what the webhook did, stored as JSON in the
// virtstation.io/injected annotation. Each step owns one field.
type Injected struct {
	MAC *InjectedMAC `json:"mac,omitempty"`
}

// InjectedMAC records a MAC the webhook pinned.
type InjectedMAC struct {
	// Interface is the name of the pod-network interface.
	Interface string `json:"interface"`
	// Address is the pinned MAC.
	Address string `json:"address"`
	// Source is SourceDerived or SourceAnnotation.
	Source string `json:"source"`
	// AddedInterface is true when the webhook created the default
	// masquerade interface and pod network to pin the MAC on.
	AddedInterface bool `json:"addedInterface,omitempty"`
}

// Sources of a pinned MAC.
const (
	// SourceDerived: hashed from the VM's namespace and name.
	SourceDerived = "derived"
	// SourceAnnotation: given in the virtstation.io/mac annotation.
	SourceAnnotation = "annotation"
)

// IsZero reports whether nothing was injected.
func (i Injected) IsZero() bool {
	return i.MAC == nil
}

// ParseInjected reads a virtstation.io/injected value. An empty value is an
// empty record.
func ParseInjected(value string) (Injected, error) {
	var in Injected
	if value == "" {
		return in, nil
	}
	if err := json.Unmarshal([]byte(value), &in); err != nil {
		return Injected{}, fmt.Errorf("parse injected record: %w", err)
	}
	return in, nil
}

// Summary is a one-line, human-readable account of the record, for Events.
func (i Injected) Summary() string {
	if i.MAC == nil {
		return "nothing injected"
	}
	s := fmt.Sprintf("pinned MAC %s (%s) on interface %q", i.MAC.Address, i.MAC.Source, i.MAC.Interface)
	if i.MAC.AddedInterface {
		s += ", added as the default masquerade interface on the pod network"
	}
	return s
}
