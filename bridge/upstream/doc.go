// Package upstream dials KubeVirt's VMI subresources (console, vnc) and calls
// the VM restart subresource through the Kubernetes API server, exactly as
// virtctl does, as the bridge's own ServiceAccount.
//
// The ServiceAccount token is read from its file on every dial, so a rotated
// projected token is picked up without a restart. Answers the API server or
// KubeVirt gives are translated into errors the bridge can explain: busy
// (503, another client holds the VNC display), not found, forbidden.
package upstream
