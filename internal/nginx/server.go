package nginx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/virtstation/virtstation/internal/proc"
)

// Path is Debian's nginx binary.
const Path = "/usr/sbin/nginx"

const (
	// startTimeout bounds Start when the caller's ctx has no deadline; nginx
	// is up in milliseconds, the margin is for a loaded machine.
	startTimeout = 15 * time.Second
	// probeInterval is the pause between readiness probes.
	probeInterval = 20 * time.Millisecond
	// stopGrace is how long nginx gets to exit after SIGTERM (its fast
	// shutdown, which does not wait for open WebSockets) before SIGKILL.
	stopGrace = 5 * time.Second
)

// Options configure a Server.
type Options struct {
	// Addr is the host:port the configuration listens on; Start waits until
	// it accepts connections.
	Addr string
	// HTTP is configuration for the http context: maps and server blocks.
	HTTP string
	// Files are written into the directory before nginx starts, by path
	// relative to it (for example "location.d/recipe.conf").
	Files map[string][]byte
}

// Server is a running nginx. Its methods are safe for concurrent use.
type Server struct {
	// Addr is the address it listens on (Options.Addr).
	Addr string
	// Dir is its directory: configuration, logs, temporary files.
	Dir string

	process *proc.Process
	stderr  *proc.Output
	once    sync.Once
}

// Reserve returns a free 127.0.0.1 address for a listen directive.
func Reserve() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		return "", err
	}
	return addr, nil
}

// mainConfig is nginx.conf: the process's settings around the caller's
// http.conf. The temporary paths would otherwise be /var/lib/nginx.
func mainConfig(dir string) string {
	p := func(name string) string { return filepath.Join(dir, name) }
	return strings.Join([]string{
		"# Written by github.com/virtstation/virtstation/internal/nginx for one test run.",
		"daemon off;",
		"worker_processes 1;",
		"pid " + p("nginx.pid") + ";",
		"error_log stderr notice;",
		"events { worker_connections 256; }",
		"http {",
		"    include /etc/nginx/mime.types;",
		"    default_type application/octet-stream;",
		"    access_log " + p("access.log") + ";",
		"    client_body_temp_path " + p("tmp/body") + ";",
		"    proxy_temp_path " + p("tmp/proxy") + ";",
		"    fastcgi_temp_path " + p("tmp/fastcgi") + ";",
		"    uwsgi_temp_path " + p("tmp/uwsgi") + ";",
		"    scgi_temp_path " + p("tmp/scgi") + ";",
		"    include http.conf;",
		"}",
	}, "\n") + "\n"
}

// Start writes the directory and starts nginx, returning once opts.Addr
// accepts connections. ctx bounds the start only; nginx runs until Stop.
func Start(ctx context.Context, opts Options) (*Server, error) {
	if _, err := os.Stat(Path); err != nil {
		return nil, fmt.Errorf("%s is missing: install Debian's nginx (apt-get install nginx): %w", Path, err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, startTimeout)
		defer cancel()
	}
	dir, err := os.MkdirTemp("", "virtstation-nginx-")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: opts.Addr, Dir: dir, stderr: &proc.Output{}}
	if err := s.launch(ctx, opts); err != nil {
		if stopErr := s.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) launch(ctx context.Context, opts Options) error {
	files := map[string][]byte{"nginx.conf": []byte(mainConfig(s.Dir)), "http.conf": []byte(opts.HTTP)}
	for name, data := range opts.Files {
		if filepath.IsAbs(name) || !filepath.IsLocal(name) {
			return fmt.Errorf("file %q: want a path inside the directory", name)
		}
		files[name] = data
	}
	if err := os.MkdirAll(filepath.Join(s.Dir, "tmp"), 0o755); err != nil {
		return err
	}
	for name, data := range files {
		path := filepath.Join(s.Dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	cred, err := unprivileged(s.Dir)
	if err != nil {
		return err
	}
	cmd := exec.Command(Path, "-p", s.Dir+"/", "-c", filepath.Join(s.Dir, "nginx.conf"), "-e", "stderr")
	cmd.Dir = s.Dir
	cmd.Stdout = s.stderr
	cmd.Stderr = s.stderr
	// Its own process group, so Stop can end the worker too; SIGTERM when
	// the test binary dies, so the master ends its worker itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM, Credential: cred}
	if s.process, err = proc.Start(cmd); err != nil {
		return fmt.Errorf("start nginx: %w", err)
	}
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err == nil {
			return c.Close()
		}
		select {
		case <-s.process.Exited():
			return fmt.Errorf("nginx exited: %s\n%s", s.process.State(), s.stderr.String())
		case <-ctx.Done():
			return fmt.Errorf("nginx did not listen on %s: %w\n%s", s.Addr, ctx.Err(), s.stderr.String())
		case <-time.After(probeInterval):
		}
	}
}

// unprivileged is nil for a non-root test; for root it is the user nobody,
// who is then given dir.
func unprivileged(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		return nil, fmt.Errorf("look up the user nobody to run nginx as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, err
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, err
	}
	err = filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, int(uid), int(gid))
	})
	if err != nil {
		return nil, fmt.Errorf("give %s to nobody: %w", dir, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), NoSetGroups: true}, nil
}

// Logs is what nginx wrote to stderr: its error log.
func (s *Server) Logs() string { return s.stderr.String() }

// WaitLog waits until the error log contains substr, or timeout passes.
// nginx's lines reach Logs through a pipe, a moment after it wrote them.
func (s *Server) WaitLog(substr string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !strings.Contains(s.Logs(), substr) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(probeInterval)
	}
	return true
}

// AccessLog is nginx's access log so far.
func (s *Server) AccessLog() (string, error) {
	b, err := os.ReadFile(filepath.Join(s.Dir, "access.log"))
	return string(b), err
}

// Stop ends nginx and removes its directory. It is safe to call twice.
func (s *Server) Stop() error {
	var err error
	s.once.Do(func() {
		defer func() { err = errors.Join(err, os.RemoveAll(s.Dir)) }()
		if s.process == nil {
			return
		}
		_ = s.process.Signal(syscall.SIGTERM)
		select {
		case <-s.process.Exited():
		case <-time.After(stopGrace):
			_ = syscall.Kill(-s.process.Pid(), syscall.SIGKILL)
			<-s.process.Exited()
			err = fmt.Errorf("nginx did not stop in %v after SIGTERM; killed", stopGrace)
		}
		// A worker that outlived its master would keep the port.
		_ = syscall.Kill(-s.process.Pid(), syscall.SIGKILL)
	})
	return err
}
