// Package upstream dials KubeVirt's VMI subresources (console, vnc) and calls
// the VM restart subresource through the Kubernetes API server, exactly as
// virtctl does, as the bridge's own ServiceAccount.
//
// Credentials go through client-go's transports, so every kubeconfig form
// works (token files, client certificates, exec plugins, impersonation). A
// WebSocket dial reads a token file afresh, and the plain requests use
// client-go's one-minute token cache, so a rotated projected token is picked
// up without a restart. Answers the API server or
// KubeVirt gives are translated into errors the bridge can explain: busy
// (503, another client holds the VNC display), not found, forbidden.
package upstream
