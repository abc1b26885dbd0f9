package bridge

import (
	"time"
)

// Defaults of Options.
const (
	// DefaultIdleTimeout ends a session after 6 hours without user input:
	// a workstation left open over lunch survives, one forgotten overnight
	// frees its slot.
	DefaultIdleTimeout = 6 * time.Hour
	// DefaultPingInterval keeps sockets alive through proxies and finds dead
	// peers within two intervals.
	DefaultPingInterval = 30 * time.Second
	// DefaultWriteTimeout is how long a peer may accept nothing before the
	// session ends as too slow.
	DefaultWriteTimeout = 30 * time.Second
	// DefaultTakeoverWait is how long a new session retries KubeVirt's
	// "busy" after a take-over, while the old connection closes.
	DefaultTakeoverWait = 10 * time.Second
	// DefaultSSHPort is the guest port SSH goes to.
	DefaultSSHPort = 22
)

// Read limits per direction: one message is the most a session buffers.
const (
	// consoleReadLimit bounds a client message to a serial console or an
	// SSH shell: typed or pasted text.
	consoleReadLimit = 64 << 10
	// vncReadLimit fits the largest RFB client message the bridge allows, a
	// 1 MiB ClientCutText, with room for framing.
	vncReadLimit = 1<<20 + 64<<10
	// upstreamReadLimit bounds a message from KubeVirt; virt-handler sends
	// chunks of tens of KiB.
	upstreamReadLimit = 4 << 20
	// sshHelloTimeout is how long a client has to send the SSH hello.
	sshHelloTimeout = 30 * time.Second
)

// Options configure a Server; zero fields take the defaults.
type Options struct {
	// AllowedOrigins are web origins besides the bridge's own that may open
	// sessions ("*" for any).
	AllowedOrigins []string
	IdleTimeout    time.Duration
	PingInterval   time.Duration
	WriteTimeout   time.Duration
	TakeoverWait   time.Duration
	// SSHPort is the guest's SSH port.
	SSHPort int
	// VNCAdaptive turns the adaptive quality controller on for VNC sessions
	// by default; a session overrides it with ?adaptive=true|false.
	VNCAdaptive bool
	// VNCLogInterval is how often each VNC session logs its throughput;
	// zero never.
	VNCLogInterval time.Duration
	// ActivityInterval is how often, at most, a VM's activity Lease is
	// written (NewFromConfig's Recorder); zero takes api.ActivityInterval.
	ActivityInterval time.Duration
}

func (o Options) withDefaults() Options {
	if o.IdleTimeout == 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.PingInterval == 0 {
		o.PingInterval = DefaultPingInterval
	}
	if o.WriteTimeout == 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.TakeoverWait == 0 {
		o.TakeoverWait = DefaultTakeoverWait
	}
	if o.SSHPort == 0 {
		o.SSHPort = DefaultSSHPort
	}
	return o
}
