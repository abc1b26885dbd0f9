package relay

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

// Endpoint is one side of a session, message by message.
type Endpoint interface {
	ReadMessage() (kind int, p []byte, err error)
	WriteMessage(kind int, p []byte) error
	Close(code int, reason string) error
}

// ClientFilter decides what a client message does: the bytes to forward
// upstream (nil forwards nothing), whether it was user input (for the idle
// timeout), or an error that ends the session with its Ending.
type ClientFilter func(kind int, p []byte) (forward []byte, input bool, err error)

// Meter counts bytes each way; nil counts nothing.
type Meter interface {
	ClientToUpstream(n int)
	UpstreamToClient(n int)
}

// Interceptor is a protocol-aware layer between the client and upstream
// (the RFB-aware VNC path). Relay calls Client and Delivered from its two
// pump goroutines; send may be called from any goroutine.
type Interceptor interface {
	// Start is called once before any message, with send, which writes a
	// message of the interceptor's own upstream (a paced request, a
	// repaint), serialized with the forwarded client messages.
	Start(send func(p []byte) error)
	// Client handles a client message, as a ClientFilter does. The bytes
	// to forward need only stay valid until the next call.
	Client(kind int, p []byte) (forward []byte, input bool, err error)
	// Upstream is called with each message read from upstream (several
	// joined into one when the upstream WS coalesces) before it is written
	// to the client, so that state the client's reply depends on is
	// recorded before the client can reply.
	Upstream(p []byte)
	// Delivered is called after that message reached the client.
	Delivered(p []byte)
	// Stop is called once when the session ends.
	Stop()
}

// Options are a session's policy.
type Options struct {
	// IdleTimeout ends a session this long after the last user input.
	IdleTimeout time.Duration
	// Filter handles client messages; nil forwards everything as input.
	Filter ClientFilter
	// Interceptor, when set, replaces Filter and sees both directions.
	Interceptor Interceptor
	// Lost, when it closes, ends the session with LostEnding().
	Lost       <-chan struct{}
	LostEnding func() Ending
	Meter      Meter
	// UpstreamName names the other side in reasons: "console", "VNC display".
	UpstreamName string
}

// EndingError is returned by a ClientFilter to end the session with a
// specific close frame.
type EndingError struct{ Ending }

func (e *EndingError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Reason) }

// Relay pumps messages between client and upstream until one side ends,
// the session is lost, it idles out or ctx ends. Both sides get a close
// frame saying why; the Ending is returned for logs and metrics.
func Relay(ctx context.Context, client, upstream Endpoint, opts Options) Ending {
	filter := opts.Filter
	if filter == nil {
		filter = func(_ int, p []byte) ([]byte, bool, error) { return p, true, nil }
	}
	if ic := opts.Interceptor; ic != nil {
		locked := &lockedEndpoint{Endpoint: upstream}
		upstream = locked
		filter = ic.Client
		ic.Start(func(p []byte) error {
			if err := locked.WriteMessage(websocket.BinaryMessage, p); err != nil {
				return err
			}
			if opts.Meter != nil {
				opts.Meter.ClientToUpstream(len(p))
			}
			return nil
		})
		defer ic.Stop()
	}
	var lastInput atomic.Int64
	lastInput.Store(time.Now().UnixNano())
	ends := make(chan Ending, 2)

	go func() { ends <- pumpClient(client, upstream, filter, &lastInput, opts) }()
	go func() { ends <- pumpUpstream(upstream, client, opts) }()

	idle := time.NewTicker(idleCheckInterval(opts.IdleTimeout))
	defer idle.Stop()
	var end Ending
wait:
	for {
		select {
		case end = <-ends:
			break wait
		case <-opts.Lost:
			end = opts.LostEnding()
			break wait
		case <-ctx.Done():
			end = Ending{Code: CodeGoingAway, Reason: "the bridge is shutting down; reconnect"}
			break wait
		case now := <-idle.C:
			if since := now.Sub(time.Unix(0, lastInput.Load())); since >= opts.IdleTimeout {
				end = Ending{Code: CodeIdle, Reason: fmt.Sprintf("closed after %s without input", opts.IdleTimeout)}
				break wait
			}
		}
	}
	_ = upstream.Close(websocket.CloseNormalClosure, "client session ended")
	_ = client.Close(end.Code, end.Reason)
	return end
}

// idleCheckInterval is a tenth of the timeout, within [10ms, 1m]: precise
// enough for a 6-hour timeout and for a test's 300 ms one.
func idleCheckInterval(timeout time.Duration) time.Duration {
	return min(max(timeout/10, 10*time.Millisecond), time.Minute)
}

func pumpClient(client, upstream Endpoint, filter ClientFilter, lastInput *atomic.Int64, opts Options) Ending {
	for {
		kind, p, err := client.ReadMessage()
		if err != nil {
			return clientGone(err)
		}
		fwd, input, err := filter(kind, p)
		if err != nil {
			var ee *EndingError
			if errors.As(err, &ee) {
				return ee.Ending
			}
			return Ending{Code: websocket.CloseUnsupportedData, Reason: err.Error()}
		}
		if input {
			lastInput.Store(time.Now().UnixNano())
		}
		if fwd == nil {
			continue
		}
		if err := upstream.WriteMessage(websocket.BinaryMessage, fwd); err != nil {
			return Ending{Code: CodeUpstreamClosed, Reason: "the " + opts.UpstreamName + " stopped accepting input"}
		}
		if opts.Meter != nil {
			opts.Meter.ClientToUpstream(len(fwd))
		}
	}
}

func pumpUpstream(upstream, client Endpoint, opts Options) Ending {
	for {
		_, p, err := upstream.ReadMessage()
		if err != nil {
			return upstreamGone(err, opts.UpstreamName)
		}
		if opts.Interceptor != nil {
			opts.Interceptor.Upstream(p)
		}
		if err := client.WriteMessage(websocket.BinaryMessage, p); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return Ending{Code: CodeClientTooSlow, Reason: "the client did not accept data in time"}
			}
			return Ending{Code: CodeNormal, Reason: "client gone"}
		}
		if opts.Meter != nil {
			opts.Meter.UpstreamToClient(len(p))
		}
		if opts.Interceptor != nil {
			opts.Interceptor.Delivered(p)
		}
	}
}

func clientGone(err error) Ending {
	var ce *websocket.CloseError
	if errors.As(err, &ce) {
		return Ending{Code: CodeNormal, Reason: "client closed the session"}
	}
	if errors.Is(err, websocket.ErrReadLimit) {
		return Ending{Code: websocket.CloseMessageTooBig, Reason: "message too large"}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return Ending{Code: websocket.CloseGoingAway, Reason: "client stopped answering pings"}
	}
	return Ending{Code: CodeNormal, Reason: "client gone"}
}

func upstreamGone(err error, name string) Ending {
	var ce *websocket.CloseError
	if errors.As(err, &ce) && ce.Text != "" {
		return Ending{Code: CodeUpstreamClosed, Reason: "the " + name + " closed: " + ce.Text}
	}
	return Ending{Code: CodeUpstreamClosed, Reason: "the " + name + " closed (VM stopped or restarted?)"}
}

// lockedEndpoint serializes writes upstream between the client pump and an
// interceptor.
type lockedEndpoint struct {
	Endpoint
	mu sync.Mutex
}

func (l *lockedEndpoint) WriteMessage(kind int, p []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.Endpoint.WriteMessage(kind, p)
}
