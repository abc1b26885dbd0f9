// Package vnc is the bridge's RFB-aware VNC path: it follows the RFB stream
// with package rfb and, per session, adapts how the VM's display is sent to
// what the client's link can take, on the server side, so that any RFB
// client (stock noVNC, KubeVirt Manager, a native viewer) benefits.
//
// The levers are those that work on QEMU as KubeVirt runs it: pacing and
// coalescing incremental FramebufferUpdateRequests, the compression-level
// pseudo-encoding and the order of encodings. Every SetEncodings the bridge
// sends carries the client's full list, because QEMU resets its state on
// each one. Tiers (Good, Fair, Poor) follow measured request-to-update
// latency with hysteresis; after about a second without screen changes one
// non-incremental repaint is requested.
package vnc
