// Package api holds Virtstation's user-facing contract on native KubeVirt
// objects: the labels that opt objects in, the annotations a user sets on a
// VirtualMachine, the annotations the webhooks write back, and the parsers for
// their values. It has no Kubernetes I/O.
package api
