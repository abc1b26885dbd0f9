package api

import (
	"fmt"
	"net"
	"strings"

	"github.com/virtstation/virtstation/mac"
)

// MACMode says how the webhook treats the pod-network interface MAC.
type MACMode int

const (
	// MACAuto pins a deterministic MAC derived from the VM's namespace and name.
	MACAuto MACMode = iota
	// MACOff leaves the interface alone.
	MACOff
	// MACFixed pins the MAC the user gave in the annotation.
	MACFixed
)

// MACSetting is the parsed value of the virtstation.io/mac annotation.
type MACSetting struct {
	Mode MACMode
	// Address is set when Mode is MACFixed.
	Address net.HardwareAddr
}

// ParseMACAnnotation parses the value of virtstation.io/mac. An absent or
// empty annotation means auto. Values are case-insensitive; a fixed MAC must
// be a valid unicast address in a form KubeVirt accepts (mac.Parse,
// mac.ValidateAssignable). Whether it is the reserved in-pod bridge address
// depends on the interface's binding; the webhook checks that when it pins.
func ParseMACAnnotation(value string) (MACSetting, error) {
	v := strings.TrimSpace(value)
	switch strings.ToLower(v) {
	case "", "auto":
		return MACSetting{Mode: MACAuto}, nil
	case "off":
		return MACSetting{Mode: MACOff}, nil
	}
	addr, err := mac.Parse(v)
	if err != nil {
		return MACSetting{}, fmt.Errorf("want auto, off or a MAC address: %w", err)
	}
	if err := mac.ValidateAssignable(addr); err != nil {
		return MACSetting{}, err
	}
	return MACSetting{Mode: MACFixed, Address: addr}, nil
}
