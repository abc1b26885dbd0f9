package vnc

import (
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"

	"github.com/virtstation/virtstation/bridge/relay"
	"github.com/virtstation/virtstation/rfb"
)

// Timings of the adaptive path.
const (
	// window is how often the controller looks at what the link did.
	window = 500 * time.Millisecond
	// tick is how often held requests and the repaint are looked at.
	tick = 20 * time.Millisecond
	// idleRepaint is how long the screen must be still before the one
	// non-incremental repaint.
	idleRepaint = time.Second
	// staleRequest bounds how long a held incremental request waits for the
	// one pending at QEMU to be answered.
	staleRequest = time.Second
)

// maxKeptOutput bounds the output buffer a Proxy keeps between client
// messages; a larger one (a big cut text) is dropped once forwarded.
const maxKeptOutput = 4 << 10

// pace is the least time between two incremental update requests per tier:
// Good forwards them as the client sends them; Fair allows ~15 updates a
// second; Poor ~5, so QEMU coalesces the changes of many frames into one.
var pace = map[Tier]time.Duration{Good: 0, Fair: 66 * time.Millisecond, Poor: 200 * time.Millisecond}

// Observer receives a session's measurements (the bridge's metrics).
type Observer interface {
	// Update records one FramebufferUpdate delivered to the client and its
	// request-to-update time: from the update request the bridge forwarded
	// to the update's last byte written to the client. QEMU holds a request
	// until the screen changes, so on a still screen this includes the wait.
	Update(requestToUpdate time.Duration)
	// Reply records a client reply time: from an update's last byte written
	// to the client's next update request (what the controller uses).
	Reply(d time.Duration)
	// Tier records the session's tier when it changes.
	Tier(t Tier)
}

// Options configure one VNC session.
type Options struct {
	// Adaptive turns the controller on; off, the proxy only measures.
	Adaptive bool
	// ViewOnly drops the client's input before it reaches the VM: keys,
	// pointer, clipboard (ClientCutText), SetDesktopSize and xvp power
	// operations. The screen still flows. Dropped messages are not input,
	// so they keep no idle session alive.
	ViewOnly bool
	// Observer receives measurements; nil drops them.
	Observer Observer
	// Log receives a throughput line every LogInterval; zero disables it.
	Log         logr.Logger
	LogInterval time.Duration
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// Proxy is the RFB-aware layer of one VNC session, a relay.Interceptor.
// Client runs on the relay's client pump, Upstream and Delivered on its
// upstream pump, and a timer (a goroutine only while it fires) paces
// requests, closes measurement windows, asks for the idle repaint and logs;
// a mutex guards the shared state. The timer is armed only for what is due,
// so an idle session costs no wake-ups. Both directions' bytes go through
// package rfb before they are forwarded, as rfb requires.
type Proxy struct {
	opts   Options
	client *rfb.ClientParser
	server *rfb.ServerTracker
	send   func([]byte) error
	timer  *time.Timer

	mu        sync.Mutex
	ctl       Controller
	encodings []int32 // the client's latest SetEncodings; nil before one
	// Update requests: QEMU keeps at most one pending (it merges the rest),
	// so the bridge forwards an incremental request only when none is
	// pending; a newer one waits in held until that and pacing allow.
	pending   bool
	pendingAt time.Time // when the pending request was forwarded
	held      []byte
	lastPaced time.Time
	// endsInMsg counts updates that ended in the message being written.
	endsInMsg   int
	trackerDown bool
	// The client's reply to the last update delivered.
	deliveredAt   time.Time
	awaitingReply bool
	replied       bool // the client has replied at least once: it asks per update
	// The current window and the repaint. A window opens with its first
	// measurement (an idle screen measures nothing) and closes at windowEnd.
	winLatencies []time.Duration
	windowOpen   bool
	windowEnd    time.Time
	lastUpdate   time.Time
	moved        bool
	// The timer: wakeAt is when it is armed for (zero when not); firing is
	// set while a wake-up runs, which re-arms it when done; stopped by Stop.
	wakeAt  time.Time
	firing  bool
	stopped bool
	idle    *sync.Cond // signalled when firing ends
	// Totals for the throughput log.
	logAt                      time.Time
	bytesToClient, bytesToVM   int64
	updatesLogged, updatesSeen int
	// out is Client's reusable output.
	out []byte
}

// NewProxy returns the proxy of one session.
func NewProxy(opts Options) *Proxy {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := rfb.NewSession()
	p := &Proxy{opts: opts, client: rfb.NewClientParser(s), server: rfb.NewServerTracker(s)}
	p.idle = sync.NewCond(&p.mu)
	return p
}

var _ relay.Interceptor = (*Proxy)(nil)

// Start implements relay.Interceptor.
func (p *Proxy) Start(send func([]byte) error) {
	p.send = send
	// Created stopped-in-effect, armed under the lock: a wake-up never runs
	// before p.timer is set.
	p.timer = time.AfterFunc(time.Hour, p.wake)
	p.timer.Stop()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.logAt = p.opts.Now()
	p.schedule(p.logAt)
}

// Stop implements relay.Interceptor. It waits for a wake-up in progress, so
// the proxy sends nothing after Stop returns.
func (p *Proxy) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopped = true
	p.timer.Stop()
	for p.firing {
		p.idle.Wait()
	}
}

// Client implements relay.Interceptor: it parses the client's bytes and
// forwards them message by message, rewriting SetEncodings and holding
// incremental update requests as the tier asks. An unknown or oversized
// message ends the session with the parser's reason.
//
// The bytes it returns are valid until the next call, as the relay's
// message is.
func (p *Proxy) Client(_ int, b []byte) ([]byte, bool, error) {
	input := false
	now := p.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.out[:0]
	defer func() {
		if cap(out) <= maxKeptOutput {
			p.out = out
		}
	}()
	p.bytesToVM += int64(len(b))
	err := p.client.Feed(b, func(m rfb.Message) error {
		switch body := m.Body.(type) {
		case rfb.SetEncodings:
			p.encodings = slices.Clone(body.Encodings)
			if p.opts.Adaptive {
				enc, err := rfb.EncodeSetEncodings(fitRewrite(p.encodings, p.ctl.Tier()))
				if err != nil {
					return err
				}
				out = append(out, enc...)
				return nil
			}
		case rfb.FramebufferUpdateRequest:
			p.clientReplied(now)
			if body.Incremental && p.opts.Adaptive && !p.mayForward(now) {
				p.held = append(p.held[:0], m.Raw...)
				p.arm(now, now.Add(tick))
				return nil
			}
			p.forwarded(now, body.Incremental)
		case rfb.KeyEvent, rfb.PointerEvent, rfb.QEMUExtendedKeyEvent, rfb.ClientCutText:
			if p.opts.ViewOnly {
				return nil
			}
			input = true
		case rfb.SetDesktopSize, rfb.XVP:
			if p.opts.ViewOnly {
				return nil
			}
		}
		out = append(out, m.Raw...)
		return nil
	})
	if err != nil {
		return nil, false, &relay.EndingError{Ending: relay.Ending{Code: relay.CodeProtocolError, Reason: err.Error()}}
	}
	if len(out) == 0 {
		return nil, input, nil
	}
	return out, input, nil
}

// clientReplied records the client's reply time to the last update.
func (p *Proxy) clientReplied(now time.Time) {
	if !p.awaitingReply {
		return
	}
	d := now.Sub(p.deliveredAt)
	p.awaitingReply, p.replied = false, true
	if p.opts.Adaptive { // only the controller reads windows
		p.openWindow(now)
		p.winLatencies = append(p.winLatencies, d)
	}
	if p.opts.Observer != nil {
		p.opts.Observer.Reply(d)
	}
}

// mayForward says whether an incremental request can go now: none is
// pending at QEMU (or the pending one is stale) and the tier's pace allows.
func (p *Proxy) mayForward(now time.Time) bool {
	if p.pending && now.Sub(p.pendingAt) < staleRequest {
		return false
	}
	return now.Sub(p.lastPaced) >= pace[p.ctl.Tier()]
}

func (p *Proxy) forwarded(now time.Time, incremental bool) {
	p.held = p.held[:0] // a forwarded request covers any held one
	if !p.pending {
		p.pending, p.pendingAt = true, now
	}
	if incremental {
		p.lastPaced = now
	}
}

// Upstream implements relay.Interceptor: it follows the server's bytes
// before they are forwarded. Trouble framing them stops the measuring, never
// the session: the bytes pass untouched either way.
func (p *Proxy) Upstream(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bytesToClient += int64(len(b))
	if p.trackerDown {
		return
	}
	err := p.server.Feed(b, func(e rfb.Event) {
		if e.Kind == rfb.EventUpdateEnd {
			p.endsInMsg++
		}
	})
	if err != nil {
		p.trackerDown = true
		p.opts.Log.Info("VNC stream not framed; measuring stops, bytes pass untouched", "error", err.Error())
	}
}

// Delivered implements relay.Interceptor: updates that ended in the message
// just written are complete on the client's side.
func (p *Proxy) Delivered([]byte) {
	now := p.opts.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.endsInMsg == 0 {
		return
	}
	p.updatesSeen += p.endsInMsg
	p.endsInMsg = 0
	p.lastUpdate, p.moved = now, true
	p.deliveredAt, p.awaitingReply = now, true
	if p.pending {
		p.pending = false
		if p.opts.Observer != nil {
			p.opts.Observer.Update(now.Sub(p.pendingAt))
		}
	}
	if !p.opts.Adaptive {
		return
	}
	p.openWindow(now)
	if len(p.held) > 0 {
		p.arm(now, now) // the held request may go now
	} else {
		p.arm(now, p.lastUpdate.Add(idleRepaint))
	}
}

// openWindow starts a measurement window with its first measurement and
// arms the timer for its end.
func (p *Proxy) openWindow(now time.Time) {
	if p.windowOpen {
		return
	}
	p.windowOpen = true
	if p.windowEnd.Before(now) {
		p.windowEnd = now.Add(window)
	}
	p.arm(now, p.windowEnd)
}

// arm makes the timer fire no later than at. Called with p.mu held.
func (p *Proxy) arm(now, at time.Time) {
	if p.stopped || (!p.wakeAt.IsZero() && !at.Before(p.wakeAt)) {
		return
	}
	p.wakeAt = at
	if !p.firing { // a wake-up in progress arms the timer when it ends
		p.timer.Reset(max(at.Sub(now), 0))
	}
}

// schedule arms the timer for the next thing due. Called with p.mu held.
func (p *Proxy) schedule(now time.Time) {
	if p.opts.Adaptive {
		if len(p.held) > 0 {
			p.arm(now, now.Add(tick))
		}
		if p.windowOpen {
			p.arm(now, p.windowEnd)
		}
		if p.moved {
			p.arm(now, p.lastUpdate.Add(idleRepaint))
		}
	}
	if p.opts.LogInterval > 0 {
		p.arm(now, p.logAt.Add(p.opts.LogInterval))
	}
}

// wake forwards a held request that may go, closes the measurement
// window, asks for the idle repaint and writes the throughput log, each
// when due, then arms the timer for what is due next.
func (p *Proxy) wake() {
	now := p.opts.Now()
	var msgs [][]byte
	p.mu.Lock()
	if p.stopped || p.firing {
		p.mu.Unlock()
		return
	}
	p.firing, p.wakeAt = true, time.Time{}
	if p.opts.Adaptive {
		if len(p.held) > 0 && p.mayForward(now) {
			msgs = append(msgs, slices.Clone(p.held))
			p.forwarded(now, true)
		}
		if p.windowOpen && !now.Before(p.windowEnd) {
			p.windowOpen = false
			p.windowEnd = now.Add(window)
			msgs = append(msgs, p.closeWindow(now)...)
		}
		if p.moved && now.Sub(p.lastUpdate) >= idleRepaint {
			p.moved = false
			if w, h := p.client.Session().FramebufferSize(); w > 0 && h > 0 {
				msgs = append(msgs, rfb.EncodeFramebufferUpdateRequest(false, 0, 0, w, h))
				p.forwarded(now, false)
			}
		}
	}
	p.logThroughput(now)
	p.mu.Unlock()

	var err error
	for _, m := range msgs {
		if err = p.send(m); err != nil {
			break // the session is ending
		}
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.firing = false
	p.idle.Broadcast()
	if err != nil || p.stopped {
		return
	}
	now = p.opts.Now()
	p.schedule(now)
	if !p.wakeAt.IsZero() {
		p.timer.Reset(max(p.wakeAt.Sub(now), 0))
	}
}

// closeWindow feeds the window to the controller and returns the
// SetEncodings to send when the tier changed.
func (p *Proxy) closeWindow(now time.Time) [][]byte {
	w := Window{Updates: len(p.winLatencies), Latency: median(p.winLatencies)}
	if p.awaitingReply && p.replied {
		w.Pending = now.Sub(p.deliveredAt)
	}
	p.winLatencies = p.winLatencies[:0]
	if p.awaitingReply && p.replied {
		p.windowOpen = true // the next window goes on measuring the wait
	}
	before := p.ctl.Tier()
	after := p.ctl.Observe(w, now)
	if after == before {
		return nil
	}
	if p.opts.Observer != nil {
		p.opts.Observer.Tier(after)
	}
	if p.encodings == nil || p.client.Phase() != rfb.PhaseNormal {
		return nil
	}
	enc, err := rfb.EncodeSetEncodings(fitRewrite(p.encodings, after))
	if err != nil {
		return nil
	}
	return [][]byte{enc}
}

func (p *Proxy) logThroughput(now time.Time) {
	if p.opts.LogInterval <= 0 || now.Sub(p.logAt) < p.opts.LogInterval {
		return
	}
	secs := now.Sub(p.logAt).Seconds()
	p.opts.Log.Info("VNC throughput",
		"toClientBytesPerSec", int64(float64(p.bytesToClient)/secs),
		"toVMBytesPerSec", int64(float64(p.bytesToVM)/secs),
		"updatesPerSec", fmt.Sprintf("%.1f", float64(p.updatesSeen-p.updatesLogged)/secs),
		"tier", p.ctl.Tier().String())
	p.logAt, p.bytesToClient, p.bytesToVM, p.updatesLogged = now, 0, 0, p.updatesSeen
}

// Tier is the session's current tier.
func (p *Proxy) Tier() Tier {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.ctl.Tier()
}

// fitRewrite is Rewrite within rfb's cap on list length: a client that
// already lists the maximum keeps its own list (pacing still applies).
func fitRewrite(client []int32, t Tier) []int32 {
	out := Rewrite(client, t)
	if len(out) > rfb.MaxEncodings {
		return client
	}
	return out
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
