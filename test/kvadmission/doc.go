// Command kvadmission runs KubeVirt v1.9.0's own admission code, unchanged,
// so that Virtstation's tests are judged by KubeVirt rather than by our
// reading of its documentation.
//
// For a VirtualMachine it does what a real cluster does, in order:
//
//   - virt-api's VirtualMachine mutator (defaults, instancetype inference),
//   - virt-api's VirtualMachine admitter (what `kubectl apply` sees),
//   - then, as when the VM starts, virt-controller's SetupVMIFromVM with the
//     instancetype and preference applied, virt-api's VirtualMachineInstance
//     mutator, and its VirtualMachineInstance create admitter (what the user
//     would otherwise learn only when the VM fails to start).
//
// It has two modes:
//
//	kvadmission check [flags] < vms.json   one JSON verdict line per VM
//	kvadmission serve [flags]              a validating webhook for envtest
//
// It is a module of its own because kubevirt.io/kubevirt pins Kubernetes
// 0.34 and pulls a large dependency tree; hack/kubevirt-admission.sh builds it
// once per machine into the cache. Three of KubeVirt's dependencies are
// refused by the Go module proxy, so standin/ holds compile-only stand-ins
// for the names KubeVirt's packages reference (see standin/README.md). None
// of them is reached on the admission path.
package main
