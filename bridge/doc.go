// Package bridge serves a VM's serial console, VNC display and SSH to
// browsers and CLIs over WebSockets, guarded by Kubernetes RBAC and one
// session per VM per mode.
//
// A session request goes through the same steps whatever its mode, each in
// its own file: the Origin and the bearer token are checked (auth), RBAC is
// asked with a SubjectAccessReview (auth), the VM and its VMI are read and
// their state explained (target.go), the session slot is taken in a Lease
// (session), KubeVirt's subresource is dialled through the API server as the
// bridge's ServiceAccount (upstream) or SSH is opened to the guest
// (sshbridge), and relay pumps the bytes.
//
// An error known before the session starts reaches a CLI as an HTTP status
// with a Kubernetes Status body, and a browser, which cannot read the status
// of a failed WebSocket handshake, as a close frame with code 4000+status.
// Errors during a session are close frames (see relay's Code constants).
package bridge
