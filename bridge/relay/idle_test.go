package relay_test

import (
	"bufio"
	"context"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/bridge/vnc"
)

// idleSessions is how many idle VNC sessions TestIdleVNCSessionFootprint
// holds open at once.
const idleSessions = 200

// Issue 8 part 4's budget for an idle VNC session in the whole bridge; the
// relay's share, measured here, must leave room for the rest (the session
// Lease, metrics, TLS).
const (
	idleBytesBudget      = 64 << 10
	idleRelayBytesBound  = 20 << 10
	idleGoroutinesBound  = 2
	idleSettle           = 1500 * time.Millisecond // past the proxy's idle repaint
	idleHandshakeTimeout = 10 * time.Second
)

// TestIdleVNCSessionFootprint opens idleSessions VNC sessions through the
// bridge's relay as bridge/ws.go assembles it (client Upgrader and upstream
// Dialer with the bridge's buffer settings, relay.WS both sides, a
// vnc.Proxy), carries an RFB handshake and one 32 KiB screen update
// through each, lets them go idle, and measures the live heap, the
// goroutine stacks and the goroutines per session (after two collections,
// which also empty the buffer pools: pooled buffers are the process's, not
// a session's). The peers (the browser and the API
// server) are raw sockets that frame WebSocket by hand, so that almost
// nothing of theirs is in the figures; what they do hold, one TCP
// connection pair per session, is measured apart and subtracted.
func TestIdleVNCSessionFootprint(t *testing.T) {
	// A first round makes what a process sets up once (pools, the
	// runtime's and net/http's caches), so that the rounds measured count
	// sessions only.
	_ = idleFootprint(t, true, idleSessions)
	for _, tc := range []struct {
		name     string
		adaptive bool
	}{{"adaptive off", false}, {"adaptive on", true}} {
		name, adaptive := tc.name, tc.adaptive
		t.Run(name, func(t *testing.T) {
			f := idleFootprint(t, adaptive, idleSessions)
			bytes, goroutines := f.heap+f.stack, f.goroutines
			t.Logf("%s, per idle VNC session (%d sessions): %.0f bytes (heap %.0f, stacks %.0f; heap spans %.0f), %.2f goroutines",
				name, idleSessions, bytes, f.heap, f.stack, f.spans, goroutines)
			if goroutines > idleGoroutinesBound+0.1 {
				t.Errorf("%.2f goroutines per idle session, want at most %d", goroutines, idleGoroutinesBound)
			}
			if !raceEnabled && bytes > idleRelayBytesBound {
				t.Errorf("%.0f bytes per idle session, want at most %d", bytes, idleRelayBytesBound)
			}
		})
	}
}

// footprint is what one idle session holds: heap is live objects, spans
// the heap spans in use (fragmentation included; noisier), stack the
// goroutine stacks.
type footprint struct {
	heap, spans, stack, goroutines float64
}

// idleFootprint returns the heap and stack bytes and the goroutines per
// idle session, less one loopback connection pair's bytes.
func idleFootprint(t *testing.T, adaptive bool, sessions int) footprint {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	up := newRawUpstream(t)
	ended := make(chan relay.Ending, sessions)
	bridge := httptest.NewServer(bridgeHandler(ctx, up.url(), adaptive, ended))
	defer bridge.Close()
	addr := strings.TrimPrefix(bridge.URL, "http://")

	pairBytes := connPairBytes(t, sessions)
	settleGoroutines(t)
	m0, g0 := inUse()
	clients := make([]*rawPeer, 0, sessions)
	defer func() {
		for _, c := range clients {
			_ = c.conn.Close()
		}
		for _, c := range up.conns() {
			_ = c.conn.Close()
		}
	}()
	for i := range sessions {
		c, err := dialRaw(addr)
		if err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
		clients = append(clients, c)
		if err := rfbSession(c, up.next(t)); err != nil {
			t.Fatalf("session %d: %v", i, err)
		}
	}
	time.Sleep(idleSettle)
	m1, g1 := inUse()
	select {
	case end := <-ended:
		t.Fatalf("a session ended while idle: %+v", end)
	default:
	}
	n := float64(sessions)
	return footprint{
		heap:       delta(m0.HeapAlloc, m1.HeapAlloc)/n - pairBytes,
		spans:      delta(m0.HeapInuse, m1.HeapInuse)/n - pairBytes,
		stack:      delta(m0.StackInuse, m1.StackInuse) / n,
		goroutines: float64(g1-g0) / n,
	}
}

// bridgeHandler is the bridge's VNC session, as bridge/ws.go assembles it,
// without authentication and the session Lease: the handler sets the
// session up and returns, and the relay runs on a goroutine of its own,
// with a Lost context (never done) as the Lease's.
func bridgeHandler(ctx context.Context, upstreamURL string, adaptive bool, ended chan<- relay.Ending) http.Handler {
	upgrader := websocket.Upgrader{
		HandshakeTimeout: idleHandshakeTimeout,
		Subprotocols:     []string{"binary"},
		ReadBufferSize:   relay.ReadBufferSize,
		WriteBufferSize:  relay.WriteBufferSize,
		WriteBufferPool:  relay.WriteBufferPool(),
	}
	dialer := websocket.Dialer{
		HandshakeTimeout: idleHandshakeTimeout,
		Subprotocols:     []string{"plain.kubevirt.io"},
		NetDialContext:   relay.DialReadAhead,
		ReadBufferSize:   relay.ReadBufferSize,
		WriteBufferSize:  relay.WriteBufferSize,
		WriteBufferPool:  relay.WriteBufferPool(),
	}
	opts := relay.WSOptions{ReadLimit: 4 << 20, PingInterval: 30 * time.Second, WriteTimeout: 30 * time.Second}
	upOpts := opts
	upOpts.Coalesce = true
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upConn, _, err := dialer.DialContext(r.Context(), upstreamURL, nil) //nolint:contextcheck // the upstream dial belongs to this request; ctx is the bridge's lifetime
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		up := relay.NewWS(upConn, upOpts)
		conn, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			_ = up.Close(websocket.CloseNormalClosure, "client handshake failed")
			return
		}
		client := relay.NewWS(conn, opts)
		ropts := relay.Options{
			IdleTimeout:  6 * time.Hour,
			Interceptor:  vnc.NewProxy(vnc.Options{Adaptive: adaptive}),
			Lost:         context.Background(),
			LostEnding:   func() relay.Ending { return relay.Ending{Code: relay.CodeSessionLost} },
			UpstreamName: "VNC display",
		}
		go func() {
			end := relay.Relay(ctx, client, up, ropts)
			if ctx.Err() == nil {
				ended <- end
			}
		}()
	})
}

func delta(before, after uint64) float64 { return float64(int64(after) - int64(before)) }

// baseGoroutines is how many goroutines the test process has with no
// session open.
var baseGoroutines = runtime.NumGoroutine()

// settleGoroutines waits until the sessions of an earlier round are gone:
// their goroutines, and the timers that drop their connections closeGrace
// after the close frame (which keep the connections' memory until then).
func settleGoroutines(t *testing.T) {
	defer time.Sleep(relay.CloseGrace + 500*time.Millisecond)
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > baseGoroutines+10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left from an earlier round", runtime.NumGoroutine()-baseGoroutines)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// inUse collects garbage (twice, which also empties sync.Pools) and
// returns the memory statistics and the goroutines.
func inUse() (runtime.MemStats, int) {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return m, runtime.NumGoroutine()
}

// connPairBytes measures what the peers hold per session (live heap): one
// loopback TCP connection pair, each end with the peers' small reader.
func connPairBytes(t *testing.T, pairs int) float64 {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	m0, _ := inUse()
	peers := make([]*rawPeer, 0, 2*pairs)
	for range pairs {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		s, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		peers = append(peers, newRawPeer(c), newRawPeer(s))
	}
	m1, _ := inUse()
	for _, p := range peers {
		_ = p.conn.Close()
	}
	return delta(m0.HeapAlloc, m1.HeapAlloc) / float64(pairs)
}

// rawPeer is one end of a WebSocket framed by hand.
type rawPeer struct {
	conn net.Conn
	r    *bufio.Reader
}

// rawReaderSize is the peers' read buffer: bufio's least.
const rawReaderSize = 16

func newRawPeer(c net.Conn) *rawPeer {
	return &rawPeer{conn: c, r: bufio.NewReaderSize(c, rawReaderSize)}
}

// writeFrame writes p as one binary frame, masked with a zero key when the
// peer is a client (which leaves the bytes as they are).
func (p *rawPeer) writeFrame(payload []byte, masked bool) error {
	h := []byte{0x82, 0}
	var mask byte
	if masked {
		mask = 0x80
	}
	switch n := len(payload); {
	case n < 126:
		h[1] = mask | byte(n)
	case n < 1<<16:
		h[1] = mask | 126
		h = binary.BigEndian.AppendUint16(h, uint16(n))
	default:
		h[1] = mask | 127
		h = binary.BigEndian.AppendUint64(h, uint64(n))
	}
	if masked {
		h = append(h, 0, 0, 0, 0)
	}
	_, err := p.conn.Write(append(h, payload...))
	return err
}

// readFrame reads one data frame's payload, unmasking it.
func (p *rawPeer) readFrame() ([]byte, error) {
	var h [2]byte
	if _, err := io.ReadFull(p.r, h[:]); err != nil {
		return nil, err
	}
	if h[0]&0x0f != 0x2 {
		return nil, fmt.Errorf("frame opcode %#x, want a binary frame", h[0])
	}
	n := uint64(h[1] & 0x7f)
	switch n {
	case 126:
		var b [2]byte
		if _, err := io.ReadFull(p.r, b[:]); err != nil {
			return nil, err
		}
		n = uint64(binary.BigEndian.Uint16(b[:]))
	case 127:
		var b [8]byte
		if _, err := io.ReadFull(p.r, b[:]); err != nil {
			return nil, err
		}
		n = binary.BigEndian.Uint64(b[:])
	}
	var key [4]byte
	if h[1]&0x80 != 0 {
		if _, err := io.ReadFull(p.r, key[:]); err != nil {
			return nil, err
		}
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(p.r, b); err != nil {
		return nil, err
	}
	for i := range b {
		b[i] ^= key[i%4]
	}
	return b, nil
}

// readBytes reads frames until it has n bytes of payload.
func (p *rawPeer) readBytes(n int) ([]byte, error) {
	var out []byte
	for len(out) < n {
		b, err := p.readFrame()
		if err != nil {
			return nil, err
		}
		out = append(out, b...)
	}
	if len(out) != n {
		return nil, fmt.Errorf("read %d bytes, want %d", len(out), n)
	}
	return out, nil
}

// readHeader reads an HTTP head up to its empty line.
func (p *rawPeer) readHeader() (string, error) {
	var head strings.Builder
	for {
		line, err := p.r.ReadString('\n')
		if err != nil {
			return "", err
		}
		if line == "\r\n" {
			return head.String(), nil
		}
		head.WriteString(line)
	}
}

func acceptKey(key string) string {
	h := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(h[:])
}

// dialRaw opens a WebSocket to the bridge as a browser would, offering the
// binary subprotocol.
func dialRaw(addr string) (*rawPeer, error) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	p := newRawPeer(c)
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	req := "GET /vnc HTTP/1.1\r\nHost: " + addr + "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Key: " + key + "\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: binary\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	head, err := p.readHeader()
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(head, "HTTP/1.1 101") || !strings.Contains(head, acceptKey(key)) {
		return nil, fmt.Errorf("handshake answered %q", head)
	}
	return p, nil
}

// rawUpstream is the API server's VNC subresource, framed by hand: it
// answers the handshake and hands each connection to the test.
type rawUpstream struct {
	ln    net.Listener
	peers chan *rawPeer
	all   []*rawPeer
}

func newRawUpstream(t *testing.T) *rawUpstream {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{ln: ln, peers: make(chan *rawPeer, 16)}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p := newRawPeer(c)
			head, err := p.readHeader()
			if err != nil {
				_ = c.Close()
				continue
			}
			var key string
			for _, l := range strings.Split(head, "\r\n") {
				if k, v, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "Sec-WebSocket-Key") {
					key = strings.TrimSpace(v)
				}
			}
			resp := "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
				"Sec-WebSocket-Accept: " + acceptKey(key) + "\r\nSec-WebSocket-Protocol: plain.kubevirt.io\r\n\r\n"
			if _, err := io.WriteString(c, resp); err != nil {
				_ = c.Close()
				continue
			}
			u.peers <- p
		}
	}()
	t.Cleanup(func() { _ = ln.Close() })
	return u
}

func (u *rawUpstream) url() string { return "ws://" + u.ln.Addr().String() + "/vnc" }

func (u *rawUpstream) next(t *testing.T) *rawPeer {
	select {
	case p := <-u.peers:
		u.all = append(u.all, p)
		return p
	case <-time.After(idleHandshakeTimeout):
		t.Fatal("the bridge never dialled upstream")
		return nil
	}
}

func (u *rawUpstream) conns() []*rawPeer { return u.all }

// The screen, and the one Raw rectangle of the update each session
// carries: 32 KiB of pixels at 32 bits, a whole virt-handler message.
const (
	screenWidth  = 128
	screenHeight = 64
)

// rfbSession carries an RFB 3.8 handshake (security None), the viewer's
// SetEncodings and first update request, and one screen update of one
// 32 KiB Raw rectangle, in two messages as virt-handler would send it.
func rfbSession(client, server *rawPeer) error {
	steps := []struct {
		fromServer bool
		msg        []byte
	}{
		{true, []byte("RFB 003.008\n")},
		{false, []byte("RFB 003.008\n")},
		{true, []byte{1, 1}},
		{false, []byte{1}},
		{true, []byte{0, 0, 0, 0}},
		{false, []byte{1}},
		{true, serverInit()},
		{false, []byte{2, 0, 0, 1, 0, 0, 0, 0}}, // SetEncodings: Raw
		{false, []byte{3, 0, 0, 0, 0, 0, 0, screenWidth, 0, screenHeight}}, // whole screen
	}
	for _, s := range steps {
		from, to := client, server
		if s.fromServer {
			from, to = server, client
		}
		if err := from.writeFrame(s.msg, !s.fromServer); err != nil {
			return err
		}
		got, err := to.readBytes(len(s.msg))
		if err != nil {
			return err
		}
		if string(got) != string(s.msg) {
			return errors.New("the relay changed a handshake message")
		}
	}
	update := []byte{0, 0, 0, 1, 0, 0, 0, 0, 0, screenWidth, 0, screenHeight, 0, 0, 0, 0}
	update = append(update, make([]byte, screenWidth*screenHeight*4)...)
	for _, part := range [][]byte{update[:32<<10], update[32<<10:]} {
		if err := server.writeFrame(part, false); err != nil {
			return err
		}
	}
	_, err := client.readBytes(len(update))
	return err
}

// serverInit is the screen at 32 bits with no name.
func serverInit() []byte {
	b := []byte{0, screenWidth, 0, screenHeight}
	b = append(b, 32, 24, 0, 1, 0, 255, 0, 255, 0, 255, 16, 8, 0, 0, 0, 0)
	return binary.BigEndian.AppendUint32(b, 0)
}
