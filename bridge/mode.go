package bridge

import (
	"github.com/virtstation/virtstation/bridge/auth"
	"github.com/virtstation/virtstation/bridge/upstream"
)

// mode is what a session reaches and what RBAC it needs.
type mode struct {
	name      string
	access    func(namespace, name string) auth.Attributes
	readLimit int64
	// sub is the KubeVirt subresource relayed; empty for SSH.
	sub upstream.Subresource
	// upstreamName names the other side in close reasons.
	upstreamName string
}

var (
	modeConsole = mode{name: "console", access: auth.ConsoleAccess, readLimit: consoleReadLimit, sub: upstream.Console, upstreamName: "serial console"}
	modeVNC     = mode{name: "vnc", access: auth.VNCAccess, readLimit: vncReadLimit, sub: upstream.VNC, upstreamName: "VNC display"}
	// SSH reaches the same guest shell as the serial console, so it needs
	// the console permission.
	modeSSH = mode{name: "ssh", access: auth.ConsoleAccess, readLimit: consoleReadLimit, upstreamName: "SSH connection"}
)

// modes by name, for the take-over route.
var modes = map[string]mode{modeConsole.name: modeConsole, modeVNC.name: modeVNC, modeSSH.name: modeSSH}
