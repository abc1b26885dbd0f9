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
// (the RFB-aware VNC path). Relay calls Client from its client pump, and
// Upstream and Delivered from its upstream pump (the calling goroutine);
// send may be called from any goroutine.
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
	// Lost, when it is done, ends the session with LostEnding(): the
	// session Lease's context (session.Session.Context).
	Lost       context.Context
	LostEnding func() Ending
	Meter      Meter
	// UpstreamName names the other side in reasons: "console", "VNC display".
	UpstreamName string
	// Ended, when set, is called once with the Ending as soon as it is
	// known, just before both close frames are sent, on the goroutine
	// that ended the session; Relay returns it later, once upstream has
	// answered.
	// It is for what should not wait for that: metrics and logs.
	Ended func(Ending)
	// Input, when set, is called on the client pump after every client
	// message the filter (or interceptor) calls user input: the VM's
	// activity (package activity). It must not block.
	Input func()
}

// EndingError is returned by a ClientFilter to end the session with a
// specific close frame.
type EndingError struct{ Ending }

func (e *EndingError) Error() string { return fmt.Sprintf("%d %s", e.Code, e.Reason) }

// Relay pumps messages between client and upstream until one side ends,
// the session is lost, it idles out or ctx ends. Both sides get a close
// frame saying why; the Ending is returned for logs and metrics.
//
// Relay pumps upstream to client on the calling goroutine and client to
// upstream on one goroutine of its own; the idle timeout is a timer and
// ctx and Lost are waited on with context.AfterFunc, so an idle session
// parks two goroutines. Once the first Ending is known, Relay returns when upstream
// has answered its close frame (or closeGrace has passed); the client pump
// drains the client's reply on its own.
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
	e := &ending{client: client, upstream: upstream, ended: opts.Ended}
	var lastInput atomic.Int64
	lastInput.Store(time.Now().UnixNano())

	go func() { e.set(pumpClient(client, upstream, filter, &lastInput, opts)) }()
	stopCtx := context.AfterFunc(ctx, func() {
		e.set(Ending{Code: CodeGoingAway, Reason: "the bridge is shutting down; reconnect"})
	})
	defer stopCtx()
	if opts.Lost != nil {
		stopLost := context.AfterFunc(opts.Lost, func() { e.set(opts.LostEnding()) }) //nolint:contextcheck // Lost is the Lease's, independent of ctx by design: either ends the session
		defer stopLost()
	}
	idle := newIdleTimer(opts.IdleTimeout, &lastInput, e)
	defer idle.stop()

	e.set(pumpUpstream(upstream, client, opts))
	return e.end
}

// ending is a session's Ending: the first one set wins, and setting it
// sends both sides their close frame.
type ending struct {
	once             sync.Once
	end              Ending
	client, upstream Endpoint
	ended            func(Ending) // Options.Ended
}

// set records end unless an Ending is known already. When set returns,
// e.end is final.
func (e *ending) set(end Ending) {
	e.once.Do(func() {
		e.end = end
		// Counted before the close frames go out, so a client that has
		// read its close frame finds the ending in /metrics.
		if e.ended != nil {
			e.ended(end)
		}
		_ = e.upstream.Close(websocket.CloseNormalClosure, "client session ended")
		_ = e.client.Close(end.Code, end.Reason)
	})
}

// idleTimer ends a session once no input has come for the idle timeout,
// checking every idleCheckInterval from a timer rather than a goroutine.
type idleTimer struct {
	timeout, every time.Duration
	lastInput      *atomic.Int64
	e              *ending
	mu             sync.Mutex
	t              *time.Timer // nil once stopped
}

func newIdleTimer(timeout time.Duration, lastInput *atomic.Int64, e *ending) *idleTimer {
	it := &idleTimer{timeout: timeout, every: idleCheckInterval(timeout), lastInput: lastInput, e: e}
	it.mu.Lock()
	defer it.mu.Unlock()
	it.t = time.AfterFunc(it.every, it.check)
	return it
}

func (it *idleTimer) check() {
	if time.Since(time.Unix(0, it.lastInput.Load())) >= it.timeout {
		it.e.set(Ending{Code: CodeIdle, Reason: fmt.Sprintf("closed after %s without input", it.timeout)})
		return
	}
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.t != nil {
		it.t.Reset(it.every)
	}
}

func (it *idleTimer) stop() {
	it.mu.Lock()
	defer it.mu.Unlock()
	it.t.Stop()
	it.t = nil
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
			if opts.Input != nil {
				opts.Input()
			}
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
