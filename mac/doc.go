// Package mac parses, validates and derives the MAC addresses Virtstation pins
// on a VirtualMachine's pod-network interface.
//
// A derived MAC is deterministic: FNV-1a over "namespace/name", with the
// locally administered, unicast first octet 0x02. It is never
// 02:00:00:00:00:00, which KubeVirt reserves for the in-pod bridge, and never
// an address the caller reports as taken: then the input is rehashed with a
// counter until a free address comes out.
package mac
