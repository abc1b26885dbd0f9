// Package testenv is Virtstation's integration harness: a real kube-apiserver
// and etcd started through controller-runtime's envtest, with the real
// KubeVirt (with its instancetypes and preferences), CDI and cert-manager
// CRDs (internal/testenv/crds), the webhook configurations from
// config/webhook, and the webhook server running in the calling process
// through webhooks.Setup.
//
// Test packages start one Env in TestMain and share it; `virtstation-demo`
// starts the same Env. The control-plane binaries come from KUBEBUILDER_ASSETS
// or, when it is unset, from hack/envtest-bins.sh (which builds them once per
// machine).
package testenv
