// Package kvadmission runs KubeVirt v1.9.0's own admission code (the
// test/kvadmission binary, built by hack/kubevirt-admission.sh) for tests:
// a Checker judges VirtualMachines one by one, and a Webhook serves the same
// judgement to the envtest API server as a validating webhook, so every VM a
// test creates passes through KubeVirt's validation, as in a real cluster.
//
// This package never imports kubevirt.io/kubevirt: the binary is a module of
// its own, and this package talks to it over stdin/stdout or HTTPS.
package kvadmission
