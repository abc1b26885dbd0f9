package virthandler

import (
	"net/http"
	"slices"
	"sync"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// Kind is the subresource a call asked for.
type Kind string

// The subresources the server answers.
const (
	Console Kind = "console"
	VNC     Kind = "vnc"
	Restart Kind = "restart"
	// StartVM and StopVM are the VM's start and stop.
	StartVM Kind = "start"
	StopVM  Kind = "stop"
	// UserList and GuestOSInfo are the VMI's guest agent calls.
	UserList    Kind = "userlist"
	GuestOSInfo Kind = "guestosinfo"
	// Screenshot is vnc/screenshot, a plain GET answered with a PNG.
	Screenshot Kind = "screenshot"
)

// The front-proxy identity headers kube-apiserver sets towards aggregated
// servers (its --requestheader-*-headers flags, as envtest configures them).
const (
	remoteUserHeader  = "X-Remote-User"
	remoteGroupHeader = "X-Remote-Group"
)

// Call is one request that reached a subresource handler.
type Call struct {
	Kind      Kind
	Namespace string
	Name      string
	// User and Groups are the identity the API server vouched for in the
	// X-Remote-User and X-Remote-Group headers.
	User   string
	Groups []string
	// PreserveSession is the VNC preserveSession query parameter.
	PreserveSession bool
	// MoveCursor is the screenshot moveCursor query parameter.
	MoveCursor bool
	// Status is the HTTP status answered: 101 for an upgraded WebSocket.
	Status int
	// RestartOptions is the decoded body of a restart call.
	RestartOptions *kubevirtv1.RestartOptions
}

// callLog records calls. Safe for concurrent use.
type callLog struct {
	mu    sync.Mutex
	calls []Call
}

// add records c and returns its index, for setStatus.
func (l *callLog) add(c Call) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = append(l.calls, c)
	return len(l.calls) - 1
}

func (l *callLog) setStatus(i, status int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls[i].Status = status
}

func (l *callLog) snapshot() []Call {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]Call, len(l.calls))
	for i, c := range l.calls {
		c.Groups = slices.Clone(c.Groups)
		if c.RestartOptions != nil {
			c.RestartOptions = c.RestartOptions.DeepCopy()
		}
		out[i] = c
	}
	return out
}

// newCall describes r; the caller fills in the outcome.
func newCall(kind Kind, r *http.Request) Call {
	return Call{
		Kind:      kind,
		Namespace: r.PathValue("namespace"),
		Name:      r.PathValue("name"),
		User:      r.Header.Get(remoteUserHeader),
		Groups:    r.Header.Values(remoteGroupHeader),
	}
}
