package sshd

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"syscall"
)

// TestUser is the local account every server started here accepts.
const TestUser = "vstest"

// stateDir keeps the test user's password and the lock that serialises its
// creation across concurrently running test binaries.
const stateDir = "/var/lib/virtstation-test"

// ensureUser makes sure the local user TestUser exists with a password this
// package knows, and returns that password. It creates the user and the
// password only when they are missing, under an exclusive flock, so test
// binaries running at the same time agree on one password.
func ensureUser() (string, error) {
	if os.Geteuid() != 0 {
		return "", fmt.Errorf("internal/sshd must run as root: sshd needs root for privilege separation, and the tests log in as the local user %s, which Start creates when missing", TestUser)
	}
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return "", fmt.Errorf("create %s: %w", stateDir, err)
	}
	lock, err := os.OpenFile(filepath.Join(stateDir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", fmt.Errorf("open lock: %w", err)
	}
	defer func() { _ = lock.Close() }() // releases the flock too
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock %s: %w", lock.Name(), err)
	}
	defer func() { _ = syscall.Flock(int(lock.Fd()), syscall.LOCK_UN) }() // closing the file releases it anyway

	if _, err := user.Lookup(TestUser); err != nil {
		var unknown user.UnknownUserError
		if !errors.As(err, &unknown) {
			return "", fmt.Errorf("look up user %s: %w", TestUser, err)
		}
		if err := run(nil, "useradd", "--create-home", "--shell", "/bin/bash", "--comment", "Virtstation test sshd user", TestUser); err != nil {
			return "", err
		}
	}

	pwFile := filepath.Join(stateDir, TestUser+".password")
	if b, err := os.ReadFile(pwFile); err == nil && len(bytes.TrimSpace(b)) > 0 {
		return string(bytes.TrimSpace(b)), nil
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("read %s: %w", pwFile, err)
	}
	raw := make([]byte, 18)
	if _, err := rand.Read(raw); err != nil {
		return "", err
	}
	password := base64.RawURLEncoding.EncodeToString(raw)
	if err := run(strings.NewReader(TestUser+":"+password+"\n"), "chpasswd"); err != nil {
		return "", err
	}
	if err := os.WriteFile(pwFile, []byte(password+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("write %s: %w", pwFile, err)
	}
	return password, nil
}

// run runs a system tool and folds its output into the error. stdin may
// carry a password, so only the tool's own output is reported.
func run(stdin *strings.Reader, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	if stdin != nil {
		cmd.Stdin = stdin
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %w: %s", name, err, bytes.TrimSpace(out))
	}
	return nil
}
