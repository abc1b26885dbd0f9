// Package envtest holds the webhooks' integration tests. Each runs against
// a real kube-apiserver and etcd with the KubeVirt, CDI and cert-manager
// CRDs and the webhook server registered as the cluster's admission
// webhooks, started once per package by the harness in internal/testenv.
package envtest
