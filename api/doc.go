// Package api holds Virtstation's vocabulary on native KubeVirt objects, the
// one place every other package takes it from: the labels that opt objects
// in, the annotations a user sets on a VirtualMachine and their parsers, the
// annotations the webhooks write back (the virtstation.io/injected record,
// Injected, and the claim annotations on data disks), the kinds of object a
// data disk is and which one a volume names (VolumeClaim), and the
// architectures with their buses and defaults (Arch). It has no Kubernetes
// I/O.
package api
