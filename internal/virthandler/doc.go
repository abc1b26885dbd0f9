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
//   - PUT  .../namespaces/{ns}/virtualmachines/{name}/start and /stop: given
//     a Client (Options.Client), virt-api's StartVMRequestHandler and
//     StopVMRequestHandler (v1.9.0) on the stored VM: start on Halted
//     patches spec.runStrategy to Always (a JSON patch testing the old
//     value), stop on Always or Once patches it to Halted, Manual and
//     RerunOnFailure get a state change request in the VM's status; the
//     same 409s (VM is already running, VM is not running, Always does not
//     support manual start requests, …) and 202 Accepted. Options.OnStart
//     and OnStop then let a test play virt-controller (create the VMI,
//     Register a QEMU; delete it). Not done: a stop's gracePeriod is not
//     written to the VMI, and a Halted VM's stop with one is taken as
//     shorter than the VMI's;
//   - GET  .../namespaces/{ns}/virtualmachineinstances/{name}/userlist and
//     /guestosinfo: KubeVirt's VirtualMachineInstanceGuestOSUserList and
//     VirtualMachineInstanceGuestAgentInfo from what a test set
//     (SetUsers, SetGuestOSInfo); 409 "VMI does not have guest agent
//     connected" when nothing is set, and, given a Client, virt-api's
//     checks of the stored VMI (404, 409 VMI is not running, 409 without
//     the AgentConnected condition);
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
