// Package core is a compile-only stand-in for kubevirt.io/virt-template-api's
// core package, which the Go module proxy refuses. It holds the names
// KubeVirt v1.9.0's controller package reads; the admission binary never
// serves VirtualMachineTemplates.
package core

// The virt-template API's group and resource names.
const (
	GroupName            = "template.kubevirt.io"
	SingularResourceName = "virtualmachinetemplate"
	PluralResourceName   = "virtualmachinetemplates"
)
