package idle_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/virtstation/virtstation/internal/virthandler"
)

const (
	// bridgeStartTimeout bounds the bridge's start: its session registry
	// lists and watches the Leases first.
	bridgeStartTimeout = 30 * time.Second
	// bridgeStopGrace is the bridge's own shutdownGrace and a bit: it
	// closes its sessions on SIGTERM, then it is killed.
	bridgeStopGrace = 10 * time.Second
	// scrapeTimeout bounds one read of /metrics or a heap profile.
	scrapeTimeout = 30 * time.Second
	// replica is the bridge's name in its session Leases.
	replica = "idle-bench"
)

// buildBridge builds cmd/bridge into dir, as it ships.
func buildBridge(ctx context.Context, root, dir string) (string, error) {
	bin := filepath.Join(dir, "virtstation-bridge")
	// -buildvcs=auto stamps the revision (and whether the tree had
	// changes) even where GOFLAGS turns it off; the report prints it.
	cmd := exec.CommandContext(ctx, "go", "build", "-buildvcs=auto", "-o", bin, "./cmd/bridge")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/bridge: %w\n%s", err, out)
	}
	return bin, nil
}

// bridgeProc is the bridge running as its own process.
type bridgeProc struct {
	cmd   *exec.Cmd
	addr  string      // host:port it serves on
	base  string      // "http://" or "https://" and addr
	tls   *tls.Config // the clients' TLS, trusting its certificate; nil for plain HTTP
	pprof string      // host:port of its net/http/pprof
	// metricsURL is its /metrics, read with scraperToken through
	// metricsHTTP: one client, so that scrapes reuse one connection and
	// add no goroutines to the bridge's count.
	metricsURL   string
	scraperToken string
	metricsHTTP  *http.Client
	logPath      string
	exited       chan struct{}
	http         *http.Client
}

// startBridge runs bin as the bridge's ServiceAccount (kubeconfig), with
// its production defaults except the Lease duration and its addresses, and
// waits until it serves; scraperToken may read its /metrics. Its log goes to a file in dir. From sz it takes the Lease
// duration, the memory profile rate (> 0 sets GODEBUG=memprofilerate),
// whether it serves TLS, and the extra flags, which follow the others.
func startBridge(ctx context.Context, bin, dir, kubeconfig, scraperToken string, sz size) (*bridgeProc, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	pprofAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	metricsAddr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(dir, "bridge.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer func() { _ = logFile.Close() }() // the child holds its own copy
	args := []string{
		"--listen-address", addr,
		"--pprof-bind-address", pprofAddr,
		"--metrics-bind-address", metricsAddr,
		"--namespace", bridgeNS,
		"--replica", replica,
		"--lease-duration", sz.lease.String(),
		// No janitor sweep while memory and CPU are measured.
		"--sweep-interval", "24h",
	}
	base, clientTLS := "http://"+addr, (*tls.Config)(nil)
	if sz.clientTLS {
		certDir := filepath.Join(dir, "tls")
		if err := os.MkdirAll(certDir, 0o700); err != nil {
			return nil, err
		}
		caPEM, err := virthandler.WriteServingCert(certDir)
		if err != nil {
			return nil, fmt.Errorf("the bridge's serving certificate: %w", err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		base, clientTLS = "https://"+addr, &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		args = append(args, "--cert-dir", certDir)
	}
	cmd := exec.CommandContext(ctx, bin, append(args, sz.bridgeArgs...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	if sz.memProfileRate > 0 {
		cmd.Env = append(cmd.Env, "GODEBUG=memprofilerate="+strconv.Itoa(sz.memProfileRate))
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the bridge: %w", err)
	}
	b := &bridgeProc{cmd: cmd, addr: addr, base: base, tls: clientTLS, pprof: pprofAddr, logPath: logPath, exited: make(chan struct{}),
		metricsURL: "https://" + metricsAddr + "/metrics", scraperToken: scraperToken,
		// The metrics server's certificate is self-signed when the bridge
		// serves plain HTTP; the public port's certificate is checked.
		metricsHTTP: &http.Client{Timeout: scrapeTimeout, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // a self-signed certificate, on loopback
		}},
		http: &http.Client{Timeout: scrapeTimeout, Transport: &http.Transport{TLSClientConfig: clientTLS}}}
	go func() { _ = cmd.Wait(); close(b.exited) }()
	deadline := time.Now().Add(bridgeStartTimeout)
	for {
		resp, err := b.http.Get(base + "/healthz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return b, nil
			}
		}
		select {
		case <-b.exited:
			return nil, fmt.Errorf("the bridge exited at start:\n%s", b.logTail())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			b.stop()
			return nil, fmt.Errorf("the bridge did not serve within %v:\n%s", bridgeStartTimeout, b.logTail())
		}
	}
}

func (b *bridgeProc) pid() int { return b.cmd.Process.Pid }

// metrics reads the bridge's /metrics, as Prometheus does: every sample
// by its name and labels as exposed, e.g.
// `virtstation_bridge_sessions_active{mode="vnc"}`.
func (b *bridgeProc) metrics() (map[string]float64, error) {
	req, err := http.NewRequest(http.MethodGet, b.metricsURL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+b.scraperToken)
	resp, err := b.metricsHTTP.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text format's samples; comments and
// timestamps are skipped.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// The name and labels end at the last space outside the label
		// values; label values here hold no spaces followed by a number,
		// so the first field after the closing brace is the value.
		key, rest := line, ""
		if i := strings.LastIndexByte(line, '}'); i >= 0 {
			key, rest = line[:i+1], strings.TrimSpace(line[i+1:])
		} else if f := strings.Fields(line); len(f) >= 2 {
			key, rest = f[0], f[1]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("malformed sample %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("sample %q: %w", line, err)
		}
		out[key] = v
	}
	return out, sc.Err()
}

// heapProfile forces a garbage collection in the bridge and fetches the
// heap profile taken right after it (net/http/pprof's ?gc=1); path ""
// discards the profile.
func (b *bridgeProc) heapProfile(path string) error {
	resp, err := b.http.Get("http://" + b.pprof + "/debug/pprof/heap?gc=1")
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET heap profile: %s", resp.Status)
	}
	w := io.Discard
	if path != "" {
		f, err := os.Create(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		w = f
	}
	_, err = io.Copy(w, resp.Body)
	return err
}

// logTail is the end of the bridge's log, for failure messages.
func (b *bridgeProc) logTail() string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return err.Error()
	}
	const tail = 4 << 10
	if len(data) > tail {
		data = data[len(data)-tail:]
	}
	return string(data)
}

// firstErrors is the first n error lines of the bridge's log, each cut
// before its stack trace.
func (b *bridgeProc) firstErrors(n int) string {
	data, err := os.ReadFile(b.logPath)
	if err != nil {
		return err.Error()
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		if !strings.Contains(line, `"level":"error"`) {
			continue
		}
		if i := strings.Index(line, `,"stacktrace"`); i >= 0 {
			line = line[:i] + "}\n"
		}
		if out = append(out, line); len(out) == n {
			break
		}
	}
	return strings.Join(out, "")
}

// keepLog copies the bridge's log out of the directory the run removes,
// and returns where it went.
func keepLog(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	kept := filepath.Join(os.TempDir(), "virtstation-idle-bridge.log")
	if err := os.WriteFile(kept, data, 0o600); err != nil {
		return err.Error()
	}
	return kept
}

// stop sends SIGTERM and kills the bridge if it has not exited after
// bridgeStopGrace.
func (b *bridgeProc) stop() {
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(bridgeStopGrace):
		_ = b.cmd.Process.Kill()
		<-b.exited
	}
}

// freeAddr is a free loopback host:port.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String(), nil
}
