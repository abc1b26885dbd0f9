// Package bridgestack sets up the bridge's world on a local control plane:
// a real QEMU (serial line and VNC) behind a stand-in virt-api that the API
// server's aggregation layer routes subresources.kubevirt.io to, the
// bridge's ServiceAccount with the RBAC shipped in config/rbac, and
// workstation users. The bridge's integration tests and `virtstation-demo`
// both start it, so the demo shows what the tests check.
package bridgestack
