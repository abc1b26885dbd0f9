// Package admission holds issue 8's admission benchmarks.
//
// BenchmarkAdmission creates VirtualMachines through a real kube-apiserver
// (the envtest control plane, with Virtstation's webhooks served in process)
// and compares three variants side by side: unlabelled (no webhook is
// called), labelled (the Virtstation webhooks mutate and validate), and the
// in-tree ValidatingAdmissionPolicy peer (the mount-path and shared-memory
// rules in CEL, no webhook). It also counts the API requests one create costs
// from the API server's own apiserver_request_total metric.
//
// BenchmarkWebhookServer drives the webhook server alone: AdmissionReviews
// for the full VM over HTTPS keep-alive at fixed rates, with the cluster
// reads answered in memory and the side-effect writes stubbed.
//
// See docs/benchmarks.md for the commands and the results.
package admission
