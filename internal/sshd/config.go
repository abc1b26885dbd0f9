package sshd

import (
	"net"
	"strconv"
	"strings"
)

// configParams are the values an sshd_config is rendered from.
type configParams struct {
	Port           int
	HostKey        string // path of the host private key
	PidFile        string
	AuthorizedKeys string // path of the authorized_keys file
	Password       bool   // PasswordAuthentication
}

// renderConfig returns an sshd_config that listens on loopback only, accepts
// only TestUser, and keeps every file it reads or writes in the temp dir.
func renderConfig(p configParams) string {
	yesNo := map[bool]string{true: "yes", false: "no"}
	lines := []string{
		"# Written by github.com/virtstation/virtstation/internal/sshd for one test run.",
		"ListenAddress " + net.JoinHostPort("127.0.0.1", strconv.Itoa(p.Port)),
		"HostKey " + p.HostKey,
		"PidFile " + p.PidFile,
		"AuthorizedKeysFile " + p.AuthorizedKeys,
		"AllowUsers " + TestUser,
		"PermitRootLogin no",
		"PubkeyAuthentication yes",
		"PasswordAuthentication " + yesNo[p.Password],
		"PermitEmptyPasswords no",
		"KbdInteractiveAuthentication no",
		// No PAM: sshd checks the password against /etc/shadow itself, and
		// the account needs no PAM stack.
		"UsePAM no",
		// The temp dir is owned by root, not by the user logging in.
		"StrictModes no",
		"UseDNS no",
		"PrintMotd no",
		"PrintLastLog no",
		"X11Forwarding no",
		"AllowTcpForwarding no",
		"AllowAgentForwarding no",
		"PermitTunnel no",
		"LoginGraceTime 30",
		// VERBOSE logs failed public-key attempts, which tests assert on.
		"LogLevel VERBOSE",
	}
	return strings.Join(lines, "\n") + "\n"
}
