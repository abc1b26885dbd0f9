// Package bridge holds the bridge's integration tests: the bridge, wired as
// cmd/bridge wires it, runs in the test process as its own ServiceAccount
// with the RBAC in config/rbac, against a real kube-apiserver whose
// aggregation layer routes subresources.kubevirt.io to a stand-in virt-api
// that pipes to a real QEMU (serial line and VNC), and SSH goes to a real
// sshd.
package bridge
