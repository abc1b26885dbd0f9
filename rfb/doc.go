// Package rfb follows an RFB (VNC) connection from the middle, as the
// bridge's VNC path sees it: between a browser client (noVNC, KubeVirt
// Manager, any RFB client) and QEMU's VNC server in virt-launcher.
//
// It is pure protocol code: no I/O, no goroutines, standard library only.
// The bridge feeds it the bytes it relays, chunk by chunk, split wherever
// the network split them.
//
// # What the bridge uses it for
//
// Client to server, the adaptive quality controller needs the client's
// messages one by one: it rewrites SetEncodings (always keeping the
// client's full list, since QEMU resets its encoding state on each one),
// paces and coalesces incremental FramebufferUpdateRequests, and injects a
// non-incremental one for the idle repaint (EncodeSetEncodings,
// EncodeFramebufferUpdateRequest, and AppendBinary on every message body).
// ClientParser gives it each message with its exact bytes (Message.Raw) and
// decoded fields (Message.Body). A message it cannot frame (an unknown
// type, a length above a cap) is an error that names the message and the
// cap: the bridge closes the session with that reason, as QEMU would drop
// such a client anyway.
//
// Server to client, the bytes pass through untouched. ServerTracker frames
// them so the bridge knows when each FramebufferUpdate starts and ends (to
// time request-to-update latency and count updates per second) and how
// many bytes it took, without decoding or storing pixels. If it meets
// something it cannot frame it returns an error; the bridge then stops
// measuring but keeps relaying. Server-side trouble never closes a session.
//
// # The two directions share a Session
//
// Neither direction of RFB can be parsed alone (see Session): the server's
// security step depends on the version the client chose, the client's
// next bytes on the security type a 3.3 server imposed, the server's on
// the type a 3.7 or 3.8 client chose, pixel sizes on the client's
// SetPixelFormat, and the length of a PointerEvent on an extension both
// sides must agree on. So a connection has one Session, shared by its
// ClientParser and ServerTracker:
//
//	s := rfb.NewSession()
//	client := rfb.NewClientParser(s) // in the client-to-server goroutine
//	server := rfb.NewServerTracker(s) // in the server-to-client goroutine
//
// Every fact one parser records is sent by its peer before the other peer
// can react to it. The rule that makes this work across two goroutines:
// feed each chunk to its parser BEFORE forwarding it. Then the fact is in
// the Session before the other peer has even received it. A parser that
// needs a fact not yet recorded reports an out-of-order error.
//
// # Handshake
//
// Both parsers follow versions 3.3, 3.7 and 3.8 (3.4 and 3.5 are read as
// 3.3, as the spec and QEMU do) with security types None and VNC
// authentication, failures with their reason strings included. Other
// security types tunnel or encrypt the rest of the stream; the parsers
// refuse them. KubeVirt's QEMU offers None on a unix socket.
//
// # Extended forms
//
//   - PointerEvent: with the ExtendedMouseButtons pseudo-encoding (-316)
//     listed in the client's latest SetEncodings and confirmed by the
//     server's -316 pseudo-rectangle, a PointerEvent whose mask byte has
//     bit 7 set is 7 bytes, not 6: bit 7 becomes a marker, the mask byte
//     carries buttons 1-7 and a trailing byte buttons 8-15. It is not the
//     same 6 bytes with bits moved. Without the confirmation bit 7 is
//     button 8 and the event is 6 bytes. QEMU 7.2 does not implement -316,
//     so against it every PointerEvent is 6 bytes.
//   - ClientCutText and ServerCutText: a negative length is the extended
//     clipboard; its magnitude is the payload size (flags included).
//
// # Limits
//
// Every length a peer controls is checked against a named cap (limits.go)
// as soon as its header is complete, before a byte of the body is
// buffered: a ClientCutText announcing 2 GiB is refused after 8 bytes. The
// ClientParser buffers at most one message and grows its buffer with what
// arrives, not with what the header announced. The ServerTracker buffers
// only ServerInit's desktop name and failure reasons, both capped; pixel
// data is counted, never stored.
//
// # Pixel formats
//
// Raw, Hextile, RRE and cursors are sized in whole pixels of the current
// pixel format: ServerInit's, replaced by the client's SetPixelFormat from
// the next FramebufferUpdate on (the spec forbids changing it with a
// request outstanding), or by a WMVi rectangle. Tight's TPIXEL is 3 bytes
// for 32-bit true colour of depth 24 with 8-bit channels. ZRLE, ZYWRLE and
// zlib rectangles carry their own length.
//
// Known QEMU deviations that a conforming client never triggers: QEMU
// serves a SetPixelFormat without true colour as 8 bits per pixel
// whatever bits-per-pixel said, and uses 3-byte TPIXELs for 32-bit 8-bit
// channel formats whatever the depth; the tracker follows the spec and, on
// such a client, reports an error and stops measuring.
package rfb
