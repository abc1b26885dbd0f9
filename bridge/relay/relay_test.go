package relay

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

var testWS = WSOptions{ReadLimit: 1 << 10, PingInterval: 100 * time.Millisecond, WriteTimeout: 300 * time.Millisecond}

// rig is a bridge in miniature: a client dials it, it dials upstream, and
// Relay pumps between them with opts.
type rig struct {
	client   *websocket.Conn
	upstream chan *websocket.Conn // the upstream server's side
	ended    chan Ending
}

func newRig(t *testing.T, ctx context.Context, opts Options) *rig {
	t.Helper()
	r := &rig{upstream: make(chan *websocket.Conn, 1), ended: make(chan Ending, 1)}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		c, err := (&websocket.Upgrader{}).Upgrade(w, req, nil)
		if err != nil {
			return
		}
		r.upstream <- c
	}))
	t.Cleanup(up.Close)
	bridge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		uc, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(up.URL, "http"), nil)
		if err != nil {
			t.Error(err)
			return
		}
		cc, err := (&websocket.Upgrader{}).Upgrade(w, req, nil)
		if err != nil {
			return
		}
		r.ended <- Relay(ctx, NewWS(cc, testWS), NewWS(uc, testWS), opts)
	}))
	t.Cleanup(bridge.Close)
	c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(bridge.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	r.client = c
	return r
}

func (r *rig) upstreamConn(t *testing.T) *websocket.Conn {
	t.Helper()
	select {
	case c := <-r.upstream:
		t.Cleanup(func() { _ = c.Close() })
		return c
	case <-time.After(5 * time.Second):
		t.Fatal("upstream never dialled")
		return nil
	}
}

// closeOf reads from c until the close frame and returns it.
func closeOf(t *testing.T, c *websocket.Conn) *websocket.CloseError {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	for {
		_, _, err := c.ReadMessage()
		var ce *websocket.CloseError
		if errors.As(err, &ce) {
			return ce
		}
		if err != nil {
			t.Fatalf("connection ended without a close frame: %v", err)
		}
	}
}

func TestRelayCarriesBytesBothWays(t *testing.T) {
	r := newRig(t, context.Background(), Options{IdleTimeout: time.Hour, Filter: ConsoleFilter, UpstreamName: "console"})
	up := r.upstreamConn(t)
	if err := r.client.WriteMessage(websocket.BinaryMessage, []byte("ls\r")); err != nil {
		t.Fatal(err)
	}
	if err := r.client.WriteMessage(websocket.TextMessage, []byte(`{"type":"resize","cols":120,"rows":40}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.client.WriteMessage(websocket.TextMessage, []byte("pwd\r")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ls\r", "pwd\r"} { // the resize never reaches the serial line
		_, p, err := up.ReadMessage()
		if err != nil || string(p) != want {
			t.Fatalf("upstream read %q, %v; want %q", p, err, want)
		}
	}
	if err := up.WriteMessage(websocket.BinaryMessage, []byte("file1\r\n")); err != nil {
		t.Fatal(err)
	}
	kind, p, err := r.client.ReadMessage()
	if err != nil || kind != websocket.BinaryMessage || string(p) != "file1\r\n" {
		t.Fatalf("client read %d %q %v", kind, p, err)
	}
}

func TestRelayEndings(t *testing.T) {
	cases := map[string]struct {
		opts   func(lost context.Context) Options
		act    func(t *testing.T, client, up *websocket.Conn, lose, cancel context.CancelFunc)
		code   int
		reason string
	}{
		"idle without input": {
			opts: func(context.Context) Options { return Options{IdleTimeout: 300 * time.Millisecond} },
			act:  func(*testing.T, *websocket.Conn, *websocket.Conn, context.CancelFunc, context.CancelFunc) {},
			code: CodeIdle, reason: "without input",
		},
		"taken over": {
			opts: func(lost context.Context) Options {
				return Options{IdleTimeout: time.Hour, Lost: lost, LostEnding: func() Ending {
					return Ending{Code: CodeTakenOver, Reason: "taken over by another user (bob)"}
				}}
			},
			act:  func(_ *testing.T, _, _ *websocket.Conn, lose, _ context.CancelFunc) { lose() },
			code: CodeTakenOver, reason: "taken over by another user (bob)",
		},
		"bridge shutting down": {
			opts: func(context.Context) Options { return Options{IdleTimeout: time.Hour} },
			act:  func(_ *testing.T, _, _ *websocket.Conn, _ context.CancelFunc, cancel context.CancelFunc) { cancel() },
			code: CodeGoingAway, reason: "shutting down",
		},
		"upstream closed": {
			opts: func(context.Context) Options { return Options{IdleTimeout: time.Hour, UpstreamName: "console"} },
			act: func(_ *testing.T, _, up *websocket.Conn, _ context.CancelFunc, _ context.CancelFunc) {
				_ = up.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "vmi stopped"), time.Now().Add(time.Second))
			},
			code: CodeUpstreamClosed, reason: "the console closed: vmi stopped",
		},
		"message over the read limit": {
			opts: func(context.Context) Options { return Options{IdleTimeout: time.Hour} },
			act: func(t *testing.T, client, _ *websocket.Conn, _ context.CancelFunc, _ context.CancelFunc) {
				_ = client.WriteMessage(websocket.BinaryMessage, make([]byte, testWS.ReadLimit+1))
			},
			code: websocket.CloseMessageTooBig,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			lost, lose := context.WithCancel(context.Background())
			defer lose()
			opts := tc.opts(lost)
			ended := make(chan Ending, 2)
			opts.Ended = func(end Ending) { ended <- end }
			r := newRig(t, ctx, opts)
			up := r.upstreamConn(t)
			go func() { // the upstream answers pings by reading
				for {
					if _, _, err := up.ReadMessage(); err != nil {
						return
					}
				}
			}()
			tc.act(t, r.client, up, lose, cancel)
			ce := closeOf(t, r.client)
			if ce.Code != tc.code || !strings.Contains(ce.Text, tc.reason) {
				t.Fatalf("close = %d %q, want %d containing %q", ce.Code, ce.Text, tc.code, tc.reason)
			}
			select {
			case end := <-r.ended:
				if end.Code != tc.code {
					t.Fatalf("Relay returned %+v", end)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("Relay did not return")
			}
			// Ended saw the same Ending, once, before Relay returned.
			if len(ended) != 1 {
				t.Fatalf("Ended called %d times, want once", len(ended))
			}
			if end := <-ended; end.Code != tc.code {
				t.Fatalf("Ended got %+v", end)
			}
		})
	}
}

func TestInputResetsTheIdleTimer(t *testing.T) {
	r := newRig(t, context.Background(), Options{IdleTimeout: 400 * time.Millisecond, Filter: ConsoleFilter})
	up := r.upstreamConn(t)
	go func() {
		for {
			if _, _, err := up.ReadMessage(); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	for time.Since(start) < time.Second { // typing keeps it open well past the timeout
		if err := r.client.WriteMessage(websocket.BinaryMessage, []byte("k")); err != nil {
			t.Fatalf("session closed while typing: %v", err)
		}
		// Resize messages are not input.
		_ = r.client.WriteMessage(websocket.TextMessage, []byte(`{"type":"resize","cols":1,"rows":1}`))
		time.Sleep(100 * time.Millisecond)
	}
	select {
	case end := <-r.ended:
		t.Fatalf("session ended while typing: %+v", end)
	default:
	}
	if ce := closeOf(t, r.client); ce.Code != CodeIdle {
		t.Fatalf("after typing stopped: close %d %q", ce.Code, ce.Text)
	}
}

func TestSlowClientEndsTheSessionInsteadOfBuffering(t *testing.T) {
	r := newRig(t, context.Background(), Options{IdleTimeout: time.Hour})
	up := r.upstreamConn(t)
	// The client never reads. The upstream floods: Relay must stop reading
	// from it (backpressure) and end the session, not queue without bound.
	chunk := make([]byte, testWS.ReadLimit)
	go func() {
		for {
			_ = up.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if err := up.WriteMessage(websocket.BinaryMessage, chunk); err != nil {
				return
			}
		}
	}()
	select {
	case end := <-r.ended:
		if end.Code != CodeClientTooSlow && end.Code != websocket.CloseGoingAway {
			t.Fatalf("ending = %+v, want client too slow or not answering pings", end)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a client that reads nothing kept the session open")
	}
}

func TestTruncateKeepsUTF8(t *testing.T) {
	s := strings.Repeat("é", 100) // 200 bytes
	got := Truncate(s)
	if len(got) > maxReasonBytes || !strings.HasPrefix(s, got) || strings.ToValidUTF8(got, "?") != got {
		t.Fatalf("Truncate = %q (%d bytes)", got, len(got))
	}
}

func TestIsResize(t *testing.T) {
	cases := map[string]struct {
		kind int
		p    string
		want bool
	}{
		"resize":         {websocket.TextMessage, `{"type":"resize","cols":80,"rows":24}`, true},
		"binary resize":  {websocket.BinaryMessage, `{"type":"resize"}`, false},
		"typed json":     {websocket.TextMessage, `{"type":"input"}`, false},
		"plain text":     {websocket.TextMessage, "resize", false},
		"broken json":    {websocket.TextMessage, `{"type":"resize"`, false},
		"huge":           {websocket.TextMessage, `{"type":"resize","pad":"` + strings.Repeat("x", 300) + `"}`, false},
		"leading spaces": {websocket.TextMessage, ` {"type":"resize"}`, true},
	}
	for name, tc := range cases {
		if got := IsResize(tc.kind, []byte(tc.p)); got != tc.want {
			t.Errorf("%s: IsResize = %v", name, got)
		}
	}
}

// TestIdleRelayParksTwoGoroutines holds sessions open, idle, with a Lost
// context and a ctx each, and counts what they park: the calling goroutine
// (the upstream pump) and the client pump, and no waiter of their own.
// Cancelling Lost then ends every session with its close frame, as a
// take-over does.
func TestIdleRelayParksTwoGoroutines(t *testing.T) {
	const sessions = 50
	quiet := WSOptions{ReadLimit: 1 << 10, PingInterval: time.Minute, WriteTimeout: time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	lost, lose := context.WithCancel(context.Background())
	defer lose()
	opts := Options{IdleTimeout: time.Hour, Lost: lost, LostEnding: func() Ending {
		return Ending{Code: CodeTakenOver, Reason: "taken over by another user (bob)"}
	}}
	ups := make(chan *websocket.Conn, sessions)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if c, err := (&websocket.Upgrader{}).Upgrade(w, req, nil); err == nil {
			ups <- c
		}
	}))
	defer up.Close()
	ended := make(chan Ending, sessions)
	bridge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		uc, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(up.URL, "http"), nil)
		if err != nil {
			t.Error(err)
			return
		}
		cc, err := (&websocket.Upgrader{}).Upgrade(w, req, nil)
		if err != nil {
			return
		}
		ended <- Relay(ctx, NewWS(cc, quiet), NewWS(uc, quiet), opts)
	}))
	defer bridge.Close()

	before := settledGoroutines(t, -1)
	clients := make([]*websocket.Conn, 0, sessions)
	for range sessions {
		c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(bridge.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		defer func() { _ = (<-ups).Close() }()
		clients = append(clients, c)
	}
	want := before + 2*sessions
	if got := settledGoroutines(t, want); got != want {
		t.Fatalf("%d goroutines with %d idle sessions, %d without; want %d (two per session)", got, sessions, before, want)
	}

	lose()
	for _, c := range clients {
		if ce := closeOf(t, c); ce.Code != CodeTakenOver {
			t.Fatalf("close = %d %q, want %d", ce.Code, ce.Text, CodeTakenOver)
		}
	}
	for range sessions {
		select {
		case end := <-ended:
			if end.Code != CodeTakenOver {
				t.Fatalf("Relay returned %+v", end)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Relay did not return")
		}
	}
	if got := settledGoroutines(t, before); got != before {
		t.Fatalf("%d goroutines after every session ended, want %d", got, before)
	}
}

// settledGoroutines waits up to 5 s for the goroutine count to reach want
// (to stop changing, when want < 0) and returns it.
func settledGoroutines(t *testing.T, want int) int {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	last := runtime.NumGoroutine()
	for time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		n := runtime.NumGoroutine()
		if n == want || (want < 0 && n == last) {
			return n
		}
		last = n
	}
	return last
}
