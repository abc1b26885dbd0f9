package bridge

import (
	"github.com/virtstation/virtstation/bridge/auth"
	"github.com/virtstation/virtstation/bridge/upstream"
)

// mode is what a session reaches and what RBAC it needs.
type mode struct {
	name string
	// action is what KubeVirt would authorise for it (auth.KubeVirtAccess).
	action    auth.Action
	readLimit int64
	// sub is the KubeVirt subresource relayed; empty for SSH.
	sub upstream.Subresource
	// upstreamName names the other side in close reasons.
	upstreamName string
}

var (
	modeConsole = mode{name: "console", action: auth.Console, readLimit: consoleReadLimit, sub: upstream.Console, upstreamName: "serial console"}
	modeVNC     = mode{name: "vnc", action: auth.VNC, readLimit: vncReadLimit, sub: upstream.VNC, upstreamName: "VNC display"}
	// SSH is a TCP connection to the guest's port 22: KubeVirt authorises
	// it as a port-forward (virtctl ssh), not as the console.
	modeSSH = mode{name: "ssh", action: auth.SSH, readLimit: consoleReadLimit, upstreamName: "SSH connection"}
)

// modes by name, for the take-over route.
var modes = map[string]mode{modeConsole.name: modeConsole, modeVNC.name: modeVNC, modeSSH.name: modeSSH}
