// Package webhooks wires Virtstation's admission webhooks and their helper
// reconcilers into a controller-runtime manager. cmd/webhook, the envtest
// harness and `virtstation demo` all build the server through Setup, so tests
// run exactly what ships.
package webhooks
