package mac

import (
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
)

// Reserved is the MAC KubeVirt gives the in-pod bridge; no VM may use it.
var Reserved = net.HardwareAddr{0x02, 0x00, 0x00, 0x00, 0x00, 0x00}

// maxRehash bounds the collision search. With 2^40 candidate addresses a
// cluster never gets near it; it only stops a broken Taken func from looping.
const maxRehash = 1 << 16

// Parse reads a 48-bit MAC in any form KubeVirt v1.9.0 accepts in an
// interface's macAddress: what net.ParseMAC reads as six octets, that is
// colon- or hyphen-separated ("02:ab:cd:ef:01:23", "02-ab-cd-ef-01-23")
// or dotted ("02ab.cdef.0123"). KubeVirt's check is net.ParseMAC and at
// most six octets (pkg/network/link/mac.go:35, ValidateMacAddress).
func Parse(s string) (net.HardwareAddr, error) {
	addr, err := net.ParseMAC(s)
	if err != nil || len(addr) != 6 {
		return nil, fmt.Errorf("mac address %q: want six hex octets separated by colons, like 02:00:5e:10:00:01", s)
	}
	return addr, nil
}

// ValidateAssignable reports why addr cannot be given to a VM interface: a
// multicast address cannot be a NIC's own. KubeVirt's admission does not
// check this, but libvirt refuses the domain ("expected unicast mac
// address"), so the VM would be admitted and never start.
func ValidateAssignable(addr net.HardwareAddr) error {
	if len(addr) != 6 {
		return errors.New("mac address must have 6 octets")
	}
	if addr[0]&0x01 != 0 {
		return fmt.Errorf("mac address %s is multicast; a VM interface needs a unicast address (even first octet)", addr)
	}
	return nil
}

// ValidateMasquerade reports why addr cannot be given to an interface with
// masquerade binding: Reserved is the in-pod bridge's own address there.
// KubeVirt refuses the literal "02:00:00:00:00:00" on masquerade
// interfaces (pkg/network/admitter/binding.go:91); this refuses every
// spelling of it, since the bridge's address would clash all the same.
// Other bindings (bridge, SR-IOV) may use it.
func ValidateMasquerade(addr net.HardwareAddr) error {
	if Equal(addr, Reserved) {
		return fmt.Errorf("mac address %s is reserved by KubeVirt for the in-pod bridge of a masquerade interface", addr)
	}
	return nil
}

// Equal reports whether a and b are the same address.
func Equal(a, b net.HardwareAddr) bool {
	return string(a) == string(b)
}

// Derive returns the deterministic MAC for a VM. It hashes "namespace/name",
// then "namespace/name#1", "namespace/name#2", … until the result is neither
// Reserved nor taken. taken may be nil. The returned counter says how many
// rehashes a collision cost (0 when the first candidate was free).
func Derive(namespace, name string, taken func(net.HardwareAddr) bool) (net.HardwareAddr, int, error) {
	key := namespace + "/" + name
	for i := 0; i < maxRehash; i++ {
		in := key
		if i > 0 {
			in = key + "#" + strconv.Itoa(i)
		}
		addr := Candidate(in)
		if Equal(addr, Reserved) {
			continue
		}
		if taken != nil && taken(addr) {
			continue
		}
		return addr, i, nil
	}
	return nil, 0, fmt.Errorf("no free mac address for %s after %d attempts", key, maxRehash)
}

// Candidate hashes in with 64-bit FNV-1a and keeps the high 40 bits behind
// the locally administered unicast octet 0x02. The high bits, because FNV's
// multiply carries each input byte upwards only: the low bits of names that
// differ in their last characters barely differ.
func Candidate(in string) net.HardwareAddr {
	h := fnv.New64a()
	h.Write([]byte(in)) // hash.Hash.Write never fails
	sum := h.Sum64()
	return net.HardwareAddr{
		0x02,
		byte(sum >> 56), byte(sum >> 48), byte(sum >> 40), byte(sum >> 32), byte(sum >> 24),
	}
}
