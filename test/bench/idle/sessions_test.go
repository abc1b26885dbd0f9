package idle_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/virtstation/virtstation/internal/virthandler"
)

const (
	// dialTimeout bounds one session's opening. The bridge makes about
	// five API requests per session; with a client-side limit
	// (-bridge-args "--kube-api-qps=50") a burst of dials queues for a
	// while.
	dialTimeout = 2 * time.Minute
	// closeWait is how long a closing client waits for the peer's close
	// frame before dropping the connection.
	closeWait = 10 * time.Second
	// clientBuffer is the clients' WebSocket buffer: they send and receive
	// nothing but control frames, and there are thousands of them in the
	// test process.
	clientBuffer = 1 << 10
)

// wsClient is one idle session's client. A goroutine reads, which answers
// the peer's pings, and records how the session ended.
type wsClient struct {
	conn  *websocket.Conn
	ended chan struct{}
	err   error // why reading stopped; valid after ended
	// closing is set before the client closes on purpose.
	closing atomic.Bool
}

// dialSession opens one WebSocket session to url with header, offering
// subprotocols, and starts its reader.
func dialSession(ctx context.Context, url string, header http.Header, subprotocols []string, tlsConf *tls.Config) (*wsClient, error) {
	d := websocket.Dialer{
		TLSClientConfig:  tlsConf,
		HandshakeTimeout: dialTimeout,
		ReadBufferSize:   clientBuffer,
		WriteBufferSize:  clientBuffer,
		Subprotocols:     subprotocols,
	}
	conn, resp, err := d.DialContext(ctx, url, header)
	if err != nil {
		if resp != nil {
			return nil, fmt.Errorf("%w (HTTP %s)", err, resp.Status)
		}
		return nil, err
	}
	c := &wsClient{conn: conn, ended: make(chan struct{})}
	go func() {
		defer close(c.ended)
		for {
			if _, _, err := conn.ReadMessage(); err != nil {
				c.err = err
				return
			}
		}
	}()
	return c, nil
}

// dropped reports whether the session ended without the client closing it.
func (c *wsClient) dropped() bool {
	select {
	case <-c.ended:
		return !c.closing.Load()
	default:
		return false
	}
}

// close ends the session as a viewer does: a close frame, then the
// connection once the peer's close frame arrives (or closeWait passes).
func (c *wsClient) close() {
	c.closing.Store(true)
	_ = c.conn.WriteControl(websocket.CloseMessage,
		websocket.FormatCloseMessage(websocket.CloseNormalClosure, "viewer closed"), time.Now().Add(closeWait))
	select {
	case <-c.ended:
	case <-time.After(closeWait):
	}
	_ = c.conn.Close()
	<-c.ended
}

// sessions is a set of open clients.
type sessions []*wsClient

// openAll dials n sessions, at most concurrency at a time; dial(i) opens
// the i-th. Any failure fails the whole set, after closing what opened.
func openAll(ctx context.Context, n, concurrency int, dial func(context.Context, int) (*wsClient, error)) (sessions, error) {
	out := make(sessions, n)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range concurrency {
		wg.Go(func() {
			for i := range next {
				c, err := dial(ctx, i)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("session %d of %d: %w", i+1, n, err)
					}
					mu.Unlock()
					cancel()
					continue
				}
				out[i] = c
			}
		})
	}
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		next <- i
	}
	close(next)
	wg.Wait()
	if firstErr != nil {
		out.closeAll(concurrency)
		return nil, firstErr
	}
	return out, nil
}

// dropped counts sessions that ended without their client closing them.
func (s sessions) dropped() (n int, first error) {
	for _, c := range s {
		if c != nil && c.dropped() {
			if first == nil {
				first = c.err
			}
			n++
		}
	}
	return n, first
}

// closeAll closes every session, concurrency at a time.
func (s sessions) closeAll(concurrency int) {
	next := make(chan *wsClient)
	var wg sync.WaitGroup
	for range concurrency {
		wg.Go(func() {
			for c := range next {
				c.close()
			}
		})
	}
	for _, c := range s {
		if c != nil {
			next <- c
		}
	}
	close(next)
	wg.Wait()
}

// bridgeDialer opens VNC sessions on VM names[i] through the bridge as
// the user, the token in the Authorization header, as a CLI does.
func bridgeDialer(b *bridgeProc, token string, names []string) func(context.Context, int) (*wsClient, error) {
	scheme := "ws://"
	if b.tls != nil {
		scheme = "wss://"
	}
	return func(ctx context.Context, i int) (*wsClient, error) {
		url := scheme + b.addr + "/api/v1/namespaces/" + userNS + "/virtualmachines/" + names[i] + "/vnc"
		h := http.Header{"Authorization": {"Bearer " + token}}
		return dialSession(ctx, url, h, []string{virthandler.Subprotocol}, b.tls)
	}
}

// poll calls cond every interval until it returns nil or the deadline
// passes; then it returns cond's last error.
func poll(ctx context.Context, deadline time.Duration, interval time.Duration, cond func() error) error {
	ctx, cancel := context.WithTimeout(ctx, deadline)
	defer cancel()
	for {
		err := cond()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("after %v: %w", deadline, err)
		case <-time.After(interval):
		}
	}
}
