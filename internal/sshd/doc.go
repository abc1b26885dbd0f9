// Package sshd starts a real OpenSSH server (Debian openssh-server,
// /usr/sbin/sshd) on a loopback port for tests, the way a guest's sshd would
// answer the bridge.
//
// Start writes a private temporary directory holding a freshly generated
// ed25519 host key, an ed25519 client key pair (its public half in the
// authorized_keys file the server reads, its private half in
// Server.ClientKeyPEM) and an sshd_config that listens on 127.0.0.1 only,
// accepts only the user vstest, and logs to stderr, which goes to the
// Options.Logf sink (the test log under StartTest) and to Server.Logs. It then
// runs `/usr/sbin/sshd -D -e -f <config>` and returns once the port answers
// with an SSH banner.
//
// # The vstest user (changes the machine)
//
// sshd logs users in as real local accounts, so the package needs one it may
// use: the first Start on a machine, running as root, creates the local user
// vstest (`useradd --create-home --shell /bin/bash vstest`) and sets a random
// password with chpasswd. The password is not a known constant: it is
// generated once and kept in /var/lib/virtstation-test/vstest.password (mode
// 0600, root only), so later runs, and test packages running concurrently
// (serialised by a flock on /var/lib/virtstation-test/lock), reuse it and
// never race to change it. Server.Password carries it to the test. Only the
// servers started here accept the account; nothing else on the machine is
// reconfigured, apart from creating /run/sshd, the privilege-separation
// directory sshd requires. To undo: `userdel -r vstest; rm -r
// /var/lib/virtstation-test`.
//
// Start therefore needs root; it says so instead of skipping.
//
// RestartWithNewHostKey replaces the host key and restarts sshd on the same
// address, which is what a reinstalled guest looks like to a client that
// pinned the old key.
package sshd
