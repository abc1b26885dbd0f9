// Package aggregation holds the integration test of the path the bridge
// takes in production: kube-apiserver's aggregation layer, authorizing with
// RBAC, proxies KubeVirt's subresources.kubevirt.io API to a stand-in for
// virt-api (internal/virthandler), which pipes to a real QEMU (internal/qemu).
package aggregation
