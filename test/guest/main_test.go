package guest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/virtstation/virtstation/bridge"
	"github.com/virtstation/virtstation/internal/bridgestack"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virtlauncher"
)

// Everything the tests share, started once in TestMain.
var (
	env        *testenv.Env
	stack      *bridgestack.Stack
	guestImage virtlauncher.Image
	bridgeS    *httptest.Server
	// storage holds the claims' image files across boots.
	storage string
	// sshPort is the loopback port every guest's port 22 is forwarded to,
	// each guest on a loopback address of its own; the bridge dials it.
	sshPort int
	// tokens of the workstation users, by namespace.
	tokens = map[string]string{}
	// artifacts receives serial logs and screenshots.
	artifacts string
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "guest tests:", err)
		code = 1
	}
	os.Exit(code)
}

func run(m *testing.M) (code int, err error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if guestImage, err = virtlauncher.FindImage(); err != nil {
		return 0, err
	}
	if artifacts = os.Getenv("VIRTSTATION_ARTIFACTS"); artifacts == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			return 0, err
		}
		artifacts = filepath.Join(root, "test", "guest", "artifacts")
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		return 0, err
	}
	if storage, err = os.MkdirTemp("", "virtstation-guest-storage-"); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(storage)) }()
	if env, err = testenv.Start(ctx); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, env.Stop()) }()
	if stack, err = bridgestack.Start(ctx, env.Config, env.FrontProxy, env.RepoRoot); err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, stack.Stop()) }()
	for _, ns := range []string{teamA} {
		if tokens[ns], err = stack.Token(ctx, ns, "user"); err != nil {
			return 0, err
		}
		if err := stack.BindWorkstationUser(ctx, ns, "user"); err != nil {
			return 0, err
		}
	}
	if sshPort, err = freePort(); err != nil {
		return 0, err
	}
	// The bridge's context: its watches end before the API server stops.
	bctx, stopBridge := context.WithCancel(ctx)
	defer stopBridge()
	srv, err := bridge.NewFromConfig(bctx, stack.BridgeConfig, bridge.Config{
		Namespace: bridgestack.Namespace, Replica: "guest",
		Options: bridge.Options{SSHPort: sshPort},
		Log:     funcr.New(func(prefix, args string) { logf("bridge %s %s", prefix, args) }, funcr.Options{}),
	})
	if err != nil {
		return 0, err
	}
	bridgeS = httptest.NewServer(srv)
	defer bridgeS.Close()
	return m.Run(), nil
}

// logf goes to the test binary's stderr only with -v: the bridge's log
// explains a refused session.
func logf(format string, args ...any) {
	if testing.Verbose() {
		fmt.Fprintf(os.Stderr, format+"\n", args...)
	}
}

// freePort is a loopback port nothing listens on.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
