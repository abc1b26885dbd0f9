package rfb

// Hard caps on the length fields a peer controls. The client parser checks
// each one against the message's header before it buffers a byte of the
// body, so a forged length never makes it allocate more than the cap. The
// server tracker buffers only ServerInit's name and failure reasons; every
// other server payload is counted and skipped, never stored.
const (
	// MaxCutTextLength bounds ClientCutText (legacy text or the
	// extended-clipboard payload). It is QEMU's own limit: QEMU drops a
	// client that announces more than 1 MiB.
	MaxCutTextLength = 1 << 20

	// MaxEncodings bounds SetEncodings. Real clients send 10 to 30 (noVNC
	// about 25 with every quality and compression level); 64 leaves room
	// for the bridge to add its own pseudo-encodings.
	MaxEncodings = 64

	// MaxScreens bounds SetDesktopSize. A workstation VM has one screen;
	// QEMU honours only the first.
	MaxScreens = 16

	// MaxFencePayload is the protocol's own limit on a fence payload.
	MaxFencePayload = 64

	// MaxDesktopNameLength bounds ServerInit's desktop name. QEMU's is at
	// most 1 KiB ("QEMU (<vm name>)").
	MaxDesktopNameLength = 64 << 10

	// MaxReasonLength bounds the reason string a server sends when it
	// refuses a connection or fails authentication. QEMU's is 22 bytes.
	MaxReasonLength = 64 << 10
)

// maxHeader is the longest fixed-size piece the server tracker collects
// before it can decide what follows: ServerInit's 24-byte head.
const maxHeader = 24
