// Package virthandler is a test stand-in for KubeVirt's virt-api and
// virt-handler, serving the VMI subresources Virtstation's bridge dials:
//
//   - GET  .../namespaces/{ns}/virtualmachineinstances/{name}/console and /vnc:
//     a WebSocket (subprotocol plain.kubevirt.io) piped, as thin as a pipe,
//     to the unix sockets registered for that VMI, normally a real QEMU's
//     (internal/qemu);
//   - GET  .../namespaces/{ns}/virtualmachineinstances/{name}/vnc/screenshot:
//     a PNG of the display, taken from QEMU's QMP monitor (screendump), as
//     virt-handler takes it through libvirt;
//   - PUT  .../namespaces/{ns}/virtualmachines/{name}/restart: recorded,
//     answered 202 Accepted;
//   - GET  /apis/subresources.kubevirt.io/v1/version: KubeVirt's
//     version.Info for KubeVirtVersion (v1.9.0);
//   - GET  /apis/subresources.kubevirt.io/v1: discovery, so the aggregator
//     marks the APIService Available; and /healthz.
//
// It behaves as KubeVirt does where the bridge can tell: one console and one
// VNC connection per VMI, a new one closing the old one, unless the VNC
// request carries preserveSession=true, which is refused with 503 while a VNC
// connection is open. Connections end without a WebSocket close frame, as
// virt-handler's do.
//
// The server is meant to sit behind kube-apiserver's aggregation layer
// (envtest.RegisterSubresourceAPI): given the front-proxy CA it refuses
// callers without the proxy's client certificate, and it records the user
// the API server vouched for in the X-Remote-User header, so tests can tell
// whose credentials the bridge used.
package virthandler
