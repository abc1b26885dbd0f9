package bridge

import (
	"errors"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/rfb"
)

// rfbClient is a VNC client that frames every byte the server sends: if
// the bridge ever broke the RFB stream, its tracker would fail.
type rfbClient struct {
	t      *testing.T
	c      *websocket.Conn
	out    *rfb.ClientParser
	in     *rfb.ServerTracker
	init   rfb.ServerInit
	events chan rfb.Event
	// readDelay slows reading down, as a slow link would.
	readDelay time.Duration
}

// noVNCEncodings is the list noVNC 1.x sends, Raw first here so that a
// rewrite that puts compact encodings first shows in what QEMU sends.
var noVNCEncodings = []int32{rfb.EncodingRaw, rfb.EncodingCopyRect, rfb.EncodingHextile, rfb.EncodingZRLE, rfb.EncodingTight, -223, -308, -224, -258, -261, -254}

// newRFBClient opens the VNC display of ws1 through server with the query
// and completes the RFB 3.8 handshake with security None.
func newRFBClient(t *testing.T, server, query string) *rfbClient {
	t.Helper()
	return newRFBClientFor(t, server, "ws1", query)
}

// newRFBClientFor is newRFBClient for VM vm.
func newRFBClientFor(t *testing.T, server, vm, query string) *rfbClient {
	t.Helper()
	c := mustDial(t, server, vmPath(vm, "vnc")+query, tokens["alice"])
	s := rfb.NewSession()
	rc := &rfbClient{t: t, c: c, out: rfb.NewClientParser(s), in: rfb.NewServerTracker(s), events: make(chan rfb.Event, 4096)}
	go rc.read()
	rc.expect(rfb.EventServerVersion)
	rc.send([]byte("RFB 003.008\n"))
	rc.expect(rfb.EventSecurityTypes)
	rc.send([]byte{byte(rfb.SecurityNone)})
	rc.expect(rfb.EventSecurityResult)
	rc.send([]byte{1}) // ClientInit, shared
	rc.init = rc.expect(rfb.EventServerInit).Init
	return rc
}

// send writes b, after following it with the client parser (the tracker
// needs what the client said).
func (rc *rfbClient) send(b []byte) {
	rc.t.Helper()
	if err := rc.out.Feed(b, func(rfb.Message) error { return nil }); err != nil {
		rc.t.Fatalf("the test client wrote bad RFB: %v", err)
	}
	if err := rc.c.WriteMessage(websocket.BinaryMessage, b); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *rfbClient) setEncodings(enc []int32) {
	rc.t.Helper()
	b, err := rfb.EncodeSetEncodings(enc)
	if err != nil {
		rc.t.Fatal(err)
	}
	rc.send(b)
}

func (rc *rfbClient) request(incremental bool) {
	rc.send(rfb.EncodeFramebufferUpdateRequest(incremental, 0, 0, rc.init.Width, rc.init.Height))
}

// read frames the server's stream until the connection ends; a framing
// error is a broken stream.
func (rc *rfbClient) read() {
	defer close(rc.events)
	for {
		_, p, err := rc.c.ReadMessage()
		if err != nil {
			return
		}
		if err := rc.in.Feed(p, func(e rfb.Event) { rc.events <- e }); err != nil {
			rc.events <- rfb.Event{Kind: streamBroken, Reason: err.Error()}
			return
		}
		time.Sleep(rc.readDelay)
	}
}

// next returns the next event, failing on a broken stream or silence.
func (rc *rfbClient) next(timeout time.Duration) (rfb.Event, error) {
	select {
	case e, ok := <-rc.events:
		if !ok {
			return e, errors.New("connection closed")
		}
		if e.Kind == streamBroken {
			rc.t.Fatalf("the RFB stream through the bridge is broken: %s", e.Reason)
		}
		return e, nil
	case <-time.After(timeout):
		return rfb.Event{}, errors.New("timed out")
	}
}

func (rc *rfbClient) expect(kind rfb.EventKind) rfb.Event {
	rc.t.Helper()
	for {
		e, err := rc.next(ioTimeout)
		if err != nil {
			rc.t.Fatalf("waiting for %v: %v", kind, err)
		}
		if e.Kind == kind {
			return e
		}
	}
}

// update reads one whole FramebufferUpdate and returns its rectangles.
func (rc *rfbClient) update(timeout time.Duration) ([]rfb.Rect, error) {
	var rects []rfb.Rect
	started := false
	for {
		e, err := rc.next(timeout)
		if err != nil {
			return nil, err
		}
		switch e.Kind {
		case rfb.EventUpdateStart:
			started = true
		case rfb.EventRect:
			rects = append(rects, e.Rect)
		case rfb.EventUpdateEnd:
			if started {
				return rects, nil
			}
		}
	}
}

// screenUpdate reads updates until one carries pixels (QEMU sends its
// pseudo-rectangles in updates of their own) and returns its encodings.
func (rc *rfbClient) screenUpdate(timeout time.Duration) ([]int32, error) {
	for {
		rects, err := rc.update(timeout)
		if err != nil {
			return nil, err
		}
		var encs []int32
		for _, r := range rects {
			if r.Encoding >= 0 || r.Encoding == -260 {
				encs = append(encs, r.Encoding)
			}
		}
		if len(encs) > 0 {
			return encs, nil
		}
	}
}

// streamBroken marks a framing error in the events; rfb's kinds start at 1.
const streamBroken rfb.EventKind = 0
