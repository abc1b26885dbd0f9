package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/gorilla/websocket"
)

// idleForTest is the --http-idle-timeout the idle tests serve with.
const idleForTest = 300 * time.Millisecond

// startServe runs serve, as main runs it, on a loopback port with an idle
// timeout of idleForTest, and returns its address. h gets /ok (a plain
// response) and /ws (a WebSocket that echoes, as the bridge's sessions are
// hijacked connections).
func startServe(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	up := websocket.Upgrader{}
	mux.HandleFunc("GET /ws", func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer func() { _ = c.Close() }()
		for {
			mt, msg, err := c.ReadMessage()
			if err != nil {
				return
			}
			if err := c.WriteMessage(mt, msg); err != nil {
				return
			}
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- serve(ctx, ln, httpOptions{idleTimeout: idleForTest}, mux, nil) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// get sends one keep-alive GET /ok on c and reads the answer.
func get(c net.Conn, br *bufio.Reader) error {
	if _, err := fmt.Fprintf(c, "GET /ok HTTP/1.1\r\nHost: bridge\r\n\r\n"); err != nil {
		return err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK || string(b) != "ok" || resp.Close {
		return fmt.Errorf("GET /ok: %s %q (close %v)", resp.Status, b, resp.Close)
	}
	return nil
}

// TestIdleKeepAliveIsClosed checks --http-idle-timeout: a keep-alive
// connection that sends no request is closed by the server (the client
// reads EOF), while one that keeps sending requests, and a WebSocket
// session that stays silent, stay open.
func TestIdleKeepAliveIsClosed(t *testing.T) {
	addr := startServe(t)
	// patience bounds every wait; far above the idle timeout, so only a
	// server that never closes idle connections reaches it.
	const patience = 30 * idleForTest

	t.Run("idle keep-alive gets EOF", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		br := bufio.NewReader(c)
		// Two requests on the connection: it is kept alive.
		for range 2 {
			if err := get(c, br); err != nil {
				t.Fatal(err)
			}
		}
		_ = c.SetReadDeadline(time.Now().Add(patience))
		n, err := br.ReadByte()
		if !errors.Is(err, io.EOF) {
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Fatalf("the idle keep-alive connection was still open after %v: no idle timeout", patience)
			}
			t.Fatalf("read on the idle connection: %q, %v; want EOF", n, err)
		}
	})

	t.Run("busy keep-alive stays open", func(t *testing.T) {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		br := bufio.NewReader(c)
		_ = c.SetDeadline(time.Now().Add(patience))
		// A request every third of the idle timeout, for three timeouts.
		for i := range 9 {
			if err := get(c, br); err != nil {
				t.Fatalf("request %d on a busy connection: %v", i, err)
			}
			time.Sleep(idleForTest / 3)
		}
	})

	t.Run("silent WebSocket session stays open", func(t *testing.T) {
		ws, _, err := websocket.DefaultDialer.Dial("ws://"+addr+"/ws", nil)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = ws.Close() }()
		time.Sleep(3 * idleForTest)
		_ = ws.SetReadDeadline(time.Now().Add(patience))
		if err := ws.WriteMessage(websocket.TextMessage, []byte("still there?")); err != nil {
			t.Fatal(err)
		}
		if _, msg, err := ws.ReadMessage(); err != nil || !strings.Contains(string(msg), "still there?") {
			t.Fatalf("a WebSocket silent for 3 idle timeouts: %q, %v; want the echo", msg, err)
		}
	})
}

// TestServeLogsSessionsLeftOpen: sessions that do not close within the
// shutdown grace are logged, not dropped silently; serve still returns nil,
// as a SIGTERM is no failure.
func TestServeLogsSessionsLeftOpen(t *testing.T) {
	cases := map[string]struct {
		wait    func(context.Context) error
		wantLog bool
	}{
		"sessions closed in time": {wait: func(context.Context) error { return nil }},
		"sessions still open": {
			wait:    func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() },
			wantLog: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var logged []string
			log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if err := serve(ctx, ln, httpOptions{idleTimeout: idleForTest, log: log}, http.NotFoundHandler(), tc.wait); err != nil {
				t.Fatalf("serve: %v", err)
			}
			got := strings.Join(logged, "\n")
			if tc.wantLog != strings.Contains(got, "sessions still open after the shutdown grace") || tc.wantLog != strings.Contains(got, "context deadline exceeded") {
				t.Errorf("log %q, want the open sessions logged: %v", got, tc.wantLog)
			}
		})
	}
}
