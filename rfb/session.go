package rfb

import (
	"slices"
	"sync"
)

// Session is what the two directions of one RFB connection must know about
// each other. Neither direction can be parsed alone:
//
//   - the server's security step depends on the version the client chose
//     (3.3: one u32; 3.7 and 3.8: a list);
//   - after the security step, the server's next bytes depend on the type
//     the client chose (3.7 and 3.8), and the client's next bytes depend on
//     the type the server imposed (3.3);
//   - the size of a pixel in a FramebufferUpdate depends on the client's
//     SetPixelFormat;
//   - a PointerEvent is 7 bytes instead of 6 once the client has asked for
//     ExtendedMouseButtons and the server has confirmed it.
//
// Each fact is produced by one direction before the other direction's
// dependent bytes can exist, because the other peer must first receive it.
// So a proxy that feeds every chunk to its parser BEFORE forwarding it
// always finds the fact recorded here in time. A parser that needs a fact
// that is not there yet reports an error (the peer broke the order).
//
// A Session is safe for concurrent use: the ClientParser and ServerTracker
// of one connection run in the proxy's two copy goroutines.
type Session struct {
	mu sync.Mutex

	serverVersion ProtocolVersion
	clientVersion ProtocolVersion
	version       Version
	security      SecurityType
	securityKnown bool

	width, height uint16
	format        PixelFormat // the format of the pixels the server sends now
	pendingFormat *PixelFormat

	extMouseRequested bool // the client's latest SetEncodings lists -316
	extMouseConfirmed bool // the server has sent the -316 pseudo-rectangle
}

// NewSession returns the state of a connection that has not started.
func NewSession() *Session { return &Session{} }

// Version is the negotiated version: the lower of the two version lines,
// or VersionUnknown until the client's has been parsed.
func (s *Session) Version() Version {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// SecurityType is the security type in use, and whether it is known yet.
func (s *Session) SecurityType() (SecurityType, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.security, s.securityKnown
}

// FramebufferSize is the size from ServerInit, updated by DesktopSize and
// successful ExtendedDesktopSize rectangles.
func (s *Session) FramebufferSize() (width, height uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.width, s.height
}

// PixelFormat is the format the tracker assumes for the server's pixels:
// ServerInit's, then the client's SetPixelFormat from the next
// FramebufferUpdate on, or a WMVi rectangle's.
func (s *Session) PixelFormat() PixelFormat {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.format
}

func (s *Session) setServerVersion(v ProtocolVersion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.serverVersion = v
	s.negotiate()
}

func (s *Session) setClientVersion(v ProtocolVersion) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.clientVersion = v
	s.negotiate()
}

// negotiate keeps version the lower of the two lines once the client's is
// known. A conforming client never asks for more than the server offered,
// so in practice it is the client's.
func (s *Session) negotiate() {
	c := s.clientVersion.Version()
	if c == VersionUnknown {
		return
	}
	if srv := s.serverVersion.Version(); srv != VersionUnknown && srv < c {
		c = srv
	}
	s.version = c
}

func (s *Session) setSecurity(t SecurityType) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.security, s.securityKnown = t, true
}

func (s *Session) setServerInit(width, height uint16, pf PixelFormat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.width, s.height, s.format = width, height, pf
}

func (s *Session) setFramebufferSize(width, height uint16) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.width, s.height = width, height
}

// requestPixelFormat records the client's SetPixelFormat. The server
// applies it to updates it starts after reading it; the tracker applies it
// from the next FramebufferUpdate header on. The spec forbids a client to
// send it with a request outstanding, which makes that exact; a client
// that breaks the rule may make the tracker lose its place (an error, and
// the bridge stops timing).
func (s *Session) requestPixelFormat(pf PixelFormat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pendingFormat = &pf
}

// updateFormat returns the pixel format for a FramebufferUpdate starting
// now, applying a pending SetPixelFormat.
func (s *Session) updateFormat() PixelFormat {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pendingFormat != nil {
		s.format, s.pendingFormat = *s.pendingFormat, nil
	}
	return s.format
}

func (s *Session) setFormat(pf PixelFormat) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.format = pf
}

func (s *Session) setEncodings(encodings []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extMouseRequested = slices.Contains(encodings, EncodingExtendedMouseButtons)
}

func (s *Session) confirmExtendedMouseButtons() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.extMouseConfirmed = true
}

// extendedPointer reports whether a PointerEvent with the marker bit (0x80)
// set carries an extra button byte: the client listed ExtendedMouseButtons
// in its latest SetEncodings and the server has confirmed the extension.
// Otherwise bit 7 is plain button 8 and the event is 6 bytes.
func (s *Session) extendedPointer() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.extMouseRequested && s.extMouseConfirmed
}
