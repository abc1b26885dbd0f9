// Package clientcert holds the integration test of webhook client
// certificates: kube-apiserver, started with an AdmissionConfiguration whose
// kubeConfigFile gives it a client certificate for the webhooks, calls a
// webhook server that requires one (--client-ca-file). Real admission keeps
// working; direct calls without the API server's certificate are refused in
// the TLS handshake. It starts its own control plane (envtest
// WithWebhookClientCerts), apart from the shared one in test/envtest.
package clientcert
