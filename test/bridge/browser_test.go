package bridge

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/internal/qemu"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// Real-browser tests of the built-in client: Debian's Chromium, driven by
// playwright-core from test/bridge/browser/driver.mjs, opens the page the
// bridge serves and works the VM's serial console, display and SSH through
// the bridge, the API server and QEMU, as a person would.

// chromiumPath is Debian's package chromium.
const chromiumPath = "/usr/bin/chromium"

// driverReplyTimeout bounds one driver command; the driver's own waits
// time out sooner (30 s) and answer with an error.
const driverReplyTimeout = 75 * time.Second

// releaseTimeout bounds the wait for a closed page's session to end at the
// bridge and KubeVirt; generous, for a loaded machine.
const releaseTimeout = 30 * time.Second

// slowDriverOp is logged: where a run on a loaded machine spends its time.
const slowDriverOp = 2 * time.Second

// noReconnectWindow is how long a taken-over page is watched for a
// reconnect attempt; the client's shortest backoff is 1 s.
const noReconnectWindow = 3 * time.Second

// browser is a running driver.mjs with one Chromium. Commands are sent one
// at a time; it is not safe for concurrent use.
type browser struct {
	cmd       *exec.Cmd
	stdin     io.WriteCloser
	replies   chan driverReply
	stderr    *syncBuffer
	next      int
	artifacts string
}

type driverReply struct {
	ID    int             `json:"id"`
	Value json.RawMessage `json:"value"`
	Error string          `json:"error"`
}

// syncBuffer collects the driver's stderr for failure messages.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}

// startBrowser starts the driver and Chromium; both end when the test does.
func startBrowser(t *testing.T) *browser {
	t.Helper()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "test", "bridge", "browser")
	if _, err := os.Stat(chromiumPath); err != nil {
		t.Fatalf("%s is missing: install Debian's chromium (apt-get install chromium)", chromiumPath)
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "playwright-core")); err != nil {
		t.Fatalf("playwright-core is missing: run npm ci in %s", dir)
	}
	artifacts := os.Getenv("VIRTSTATION_ARTIFACTS")
	if artifacts == "" {
		artifacts = filepath.Join(dir, "artifacts")
	}
	if err := os.MkdirAll(artifacts, 0o755); err != nil {
		t.Fatal(err)
	}

	cmd := exec.Command("node", filepath.Join(dir, "driver.mjs"))
	cmd.Dir = dir
	// Chromium's fresh profile goes to this test's temporary directory.
	cmd.Env = append(os.Environ(), "TMPDIR="+t.TempDir(), "CHROMIUM="+chromiumPath)
	// Its own process group, so Chromium can be ended with the driver; and
	// the driver dies with the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	b := &browser{cmd: cmd, replies: make(chan driverReply), stderr: &syncBuffer{}, artifacts: artifacts}
	cmd.Stderr = b.stderr
	if b.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start node (Debian's nodejs): %v", err)
	}
	go func() {
		defer close(b.replies)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
		for sc.Scan() {
			var r driverReply
			if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
				r = driverReply{ID: -1, Error: "driver wrote " + sc.Text()}
			}
			b.replies <- r
		}
	}()
	t.Cleanup(b.stop)
	return b
}

// stop closes the driver's stdin, which closes Chromium, and kills the
// process group if that takes too long.
func (b *browser) stop() {
	_ = b.stdin.Close()
	done := make(chan struct{})
	go func() {
		for range b.replies {
			// drain until the driver exits
		}
		_ = b.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// call sends one command and returns its value.
func (b *browser) call(op string, args map[string]any) (json.RawMessage, error) {
	b.next++
	cmd := map[string]any{"id": b.next, "op": op}
	for k, v := range args {
		cmd[k] = v
	}
	line, err := json.Marshal(cmd)
	if err != nil {
		return nil, err
	}
	if _, err := b.stdin.Write(append(line, '\n')); err != nil {
		return nil, fmt.Errorf("driver gone: %w\n%s", err, b.stderr.String())
	}
	select {
	case r, ok := <-b.replies:
		switch {
		case !ok:
			return nil, fmt.Errorf("driver exited\n%s", b.stderr.String())
		case r.ID != b.next:
			return nil, fmt.Errorf("driver answered %d to %d: %s", r.ID, b.next, r.Error)
		case r.Error != "":
			return nil, errors.New(r.Error)
		}
		return r.Value, nil
	case <-time.After(driverReplyTimeout):
		return nil, fmt.Errorf("driver did not answer %s in %v\n%s", op, driverReplyTimeout, b.stderr.String())
	}
}

// tab is one page in its own browser context, as one person's tab.
type tab struct {
	b    *browser
	t    *testing.T
	name string
}

func (b *browser) open(t *testing.T, name, url string) *tab {
	t.Helper()
	p := &tab{b: b, t: t, name: name}
	p.do("newPage", nil)
	t.Cleanup(func() { _, _ = b.call("closePage", map[string]any{"page": name}) })
	var resp struct {
		Status  int               `json:"status"`
		Headers map[string]string `json:"headers"`
	}
	p.decode(p.do("goto", map[string]any{"url": url}), &resp)
	if resp.Status != http.StatusOK {
		t.Fatalf("%s: GET the page: %d", name, resp.Status)
	}
	if csp := resp.Headers["content-security-policy"]; !strings.Contains(csp, "script-src 'self'") {
		t.Fatalf("%s: the page came without its Content-Security-Policy: %q", name, csp)
	}
	return p
}

func (p *tab) do(op string, args map[string]any) json.RawMessage {
	p.t.Helper()
	if args == nil {
		args = map[string]any{}
	}
	args["page"] = p.name
	start := time.Now()
	v, err := p.b.call(op, args)
	if took := time.Since(start); took > slowDriverOp {
		p.t.Logf("%s: %s took %v", p.name, op, took.Round(time.Millisecond))
	}
	if err != nil {
		p.screenshot("failed-" + op)
		p.t.Fatalf("%s: %s: %v", p.name, op, err)
	}
	return v
}

func (p *tab) decode(v json.RawMessage, into any) {
	p.t.Helper()
	if err := json.Unmarshal(v, into); err != nil {
		p.t.Fatalf("%s: driver value %s: %v", p.name, v, err)
	}
}

// pageStatus is the page's #status element.
type pageStatus struct {
	State string `json:"state"`
	Code  string `json:"code"`
	Text  string `json:"text"`
}

func (p *tab) waitState(state string) pageStatus {
	p.t.Helper()
	var st pageStatus
	p.decode(p.do("waitState", map[string]any{"state": state}), &st)
	return st
}

func (p *tab) waitText(selector, text string) {
	p.t.Helper()
	p.do("waitText", map[string]any{"selector": selector, "text": text})
}

func (p *tab) click(selector string) {
	p.t.Helper()
	p.do("click", map[string]any{"selector": selector})
}

func (p *tab) fill(selector, value string) {
	p.t.Helper()
	p.do("fill", map[string]any{"selector": selector, "value": value})
}

// typeInto clicks selector, then types text key by key.
func (p *tab) typeInto(selector, text string) {
	p.t.Helper()
	p.do("type", map[string]any{"selector": selector, "text": text})
}

func (p *tab) eval(expr string, into any) {
	p.t.Helper()
	p.decode(p.do("eval", map[string]any{"expr": expr}), into)
}

func (p *tab) waitFor(expr string) { p.t.Helper(); p.do("waitFor", map[string]any{"expr": expr}) }

// screenshot saves the page as an artifact; failures to do so only log.
func (p *tab) screenshot(what string) {
	path := filepath.Join(p.b.artifacts, strings.NewReplacer("/", "-", " ", "-").Replace(p.t.Name())+"-"+what+".png")
	if _, err := p.b.call("screenshot", map[string]any{"page": p.name, "path": path}); err != nil {
		p.t.Logf("%s: screenshot: %v", p.name, err)
		return
	}
	p.t.Logf("screenshot: %s", path)
}

// pageReport is what the page did, as the driver saw it.
type pageReport struct {
	Sockets []string `json:"sockets"`
	CSP     []string `json:"csp"`
	Errors  []string `json:"errors"`
	Console []string `json:"console"`
	Failed  []string `json:"failed"`
}

func (p *tab) report() pageReport {
	p.t.Helper()
	var r pageReport
	p.decode(p.do("report", nil), &r)
	return r
}

// checkClean fails on Content-Security-Policy violations and uncaught
// errors: the bundle must run under the bridge's policy as it is.
func (p *tab) checkClean() {
	p.t.Helper()
	r := p.report()
	if len(r.CSP) > 0 || len(r.Errors) > 0 {
		p.t.Errorf("%s: CSP violations %q, page errors %q", p.name, r.CSP, r.Errors)
	}
	for _, m := range r.Console {
		p.t.Logf("%s console: %s", p.name, m)
	}
	for _, f := range r.Failed {
		p.t.Logf("%s HTTP: %s", p.name, f)
	}
}

// pageURL is the client's page for ws1 with the token in the fragment.
func pageURL(server, token, mode string) string { return vmPageURL(server, "ws1", token, mode) }

// vmPageURL is the client's page for a VM; an empty token leaves it out.
func vmPageURL(server, vm, token, mode string) string {
	u := server + "/ui/namespaces/" + userNS + "/virtualmachines/" + vm + "#mode=" + mode
	if token != "" {
		u += "&token=" + url.QueryEscape(token)
	}
	return u
}

// terminalRows is the text xterm.js renders on screen.
const terminalRows = "#terminal .xterm-rows"

func TestBrowserClient(t *testing.T) {
	b := startBrowser(t)

	t.Run("serial", func(t *testing.T) {
		t.Cleanup(func() { waitReleased(t, virthandler.Console) }) // after the pages close
		alice := b.open(t, "serial-alice", pageURL(replicaA.URL, tokens["alice"], "serial"))
		alice.waitState("connected")
		// The token left the URL and went to no persistent storage.
		var where struct {
			Href, Cookie string
			Local        int
		}
		alice.eval(`({href: location.href, cookie: document.cookie, local: localStorage.length})`, &where)
		if strings.Contains(where.Href, tokens["alice"]) || strings.Contains(where.Href, "token") || where.Local != 0 || where.Cookie != "" {
			t.Fatalf("after sign-in: URL %q, %d localStorage items, cookie %q", where.Href, where.Local, where.Cookie)
		}
		if !strings.HasSuffix(where.Href, "/ui/namespaces/team-a/virtualmachines/ws1#mode=serial") {
			t.Errorf("URL = %q, want the VM page in serial mode", where.Href)
		}
		// Keys typed into xterm.js reach the serial line; the guest's upper-case
		// echo comes back to the screen.
		alice.typeInto("#terminal", "hello")
		alice.waitText(terminalRows, "HELLO")
		alice.screenshot("echo")
		alice.checkClean()
	})

	t.Run("display", func(t *testing.T) {
		t.Cleanup(func() { waitReleased(t, virthandler.VNC) })
		alice := b.open(t, "display-alice", pageURL(replicaB.URL, tokens["alice"], "display"))
		alice.waitState("connected")
		// noVNC decoded QEMU's framebuffer: the canvas has a size and shows
		// something other than one flat colour (the firmware's text).
		alice.waitFor(`(() => {
			const c = document.querySelector('#screen canvas');
			if (!c || c.width < 100 || c.height < 100) return false;
			const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
			let differing = 0;
			for (let i = 4; i < px.length; i += 4) {
				if (px[i] !== px[0] || px[i + 1] !== px[1] || px[i + 2] !== px[2]) differing++;
			}
			return differing > 200;
		})()`)
		var size struct{ W, H int }
		alice.eval(`(() => { const c = document.querySelector('#screen canvas'); return {w: c.width, h: c.height}; })()`, &size)
		t.Logf("VNC framebuffer %dx%d", size.W, size.H)
		alice.screenshot("display")
		alice.checkClean()
	})

	t.Run("take-over", func(t *testing.T) {
		t.Cleanup(func() { waitReleased(t, virthandler.Console) })
		alice := b.open(t, "takeover-alice", pageURL(replicaA.URL, tokens["alice"], "serial"))
		alice.waitState("connected")
		alice.typeInto("#terminal", "a1")
		alice.waitText(terminalRows, "A1")

		// bob, in another browser on the other replica, is offered the
		// take-over, naming alice.
		bob := b.open(t, "takeover-bob", pageURL(replicaB.URL, tokens["bob"], "serial"))
		if st := bob.waitState("held"); st.Code != "4409" {
			t.Fatalf("bob's status = %+v, want held (4409)", st)
		}
		// A refusal is never shown as connected, not even for a moment.
		var states []string
		bob.eval(`window.__states`, &states)
		if slices.Contains(states, "connected") {
			t.Fatalf("bob's page went through %q before the take-over prompt", states)
		}
		bob.waitText("#prompt-text", "in use by "+user("alice"))
		bob.screenshot("prompt")
		bob.click("#takeover")
		bob.waitState("connected")

		// alice is told who took over (her page asks the sessions list), and
		// her page stays down.
		if st := alice.waitState("taken-over"); st.Code != "4001" {
			t.Fatalf("alice's status = %+v, want taken over (4001)", st)
		}
		alice.waitText("#status", "taken over by "+user("bob"))
		alice.screenshot("taken-over")
		sockets := len(alice.report().Sockets)
		requests := sessionRequests(t, "console")
		upstream := len(handler.Calls())
		time.Sleep(noReconnectWindow)
		if n := len(alice.report().Sockets); n != sockets {
			t.Fatalf("alice's page opened %d more WebSockets after the take-over", n-sockets)
		}
		if n := sessionRequests(t, "console"); n != requests {
			t.Fatalf("the bridges saw %d more console requests after the take-over", n-requests)
		}
		if n := len(handler.Calls()); n != upstream {
			t.Fatalf("KubeVirt saw %d more subresource calls after the take-over", n-upstream)
		}
		if st := alice.waitState("taken-over"); st.Code != "4001" {
			t.Fatalf("alice's status changed to %+v", st)
		}

		// bob has the console now.
		bob.typeInto("#terminal", "b2")
		bob.waitText(terminalRows, "B2")

		// alice asks again and is offered the take-over, naming bob.
		alice.click("#reconnect")
		alice.waitState("held")
		alice.waitText("#prompt-text", "in use by "+user("bob"))
		alice.screenshot("prompt-naming-bob")
		alice.click("#cancel")
		alice.checkClean()
		bob.checkClean()
	})

	t.Run("sign-in form", func(t *testing.T) {
		t.Cleanup(func() { waitReleased(t, virthandler.Console) })
		alice := b.open(t, "signin-alice", vmPageURL(replicaA.URL, "ws1", "", "serial"))
		alice.waitState("signed-out")
		alice.screenshot("form")
		alice.fill("#token", tokens["alice"])
		alice.click("#signin")
		alice.waitState("connected")
		// The tab keeps the token in sessionStorage only: a reload stays
		// signed in, and signing out forgets it.
		alice.do("reload", nil)
		alice.waitState("connected")
		alice.click("#signout")
		alice.waitState("signed-out")
		var stored struct{ Session, Local int }
		alice.eval(`({session: sessionStorage.length, local: localStorage.length})`, &stored)
		if stored.Session != 0 || stored.Local != 0 {
			t.Fatalf("after sign-out: %+v items stored", stored)
		}
		alice.checkClean()
	})

	t.Run("reconnect after a drop", func(t *testing.T) {
		// A VM of its own, so its VMI can vanish and come back.
		const name = "ws-drop"
		target := startGuest(t, name)
		alice := b.open(t, "drop-alice", vmPageURL(replicaA.URL, name, tokens["alice"], "serial"))
		alice.waitState("connected")
		alice.typeInto("#terminal", "one")
		alice.waitText(terminalRows, "ONE")

		// virt-handler goes away: the bridge closes with 4004, and the page
		// retries by itself after its first backoff (1 s).
		handler.Unregister(userNS, name)
		if st := alice.waitState("reconnecting"); st.Code != "4004" {
			t.Fatalf("after the drop: %+v, want reconnecting (4004)", st)
		}
		handler.Register(userNS, name, target)
		alice.waitState("connected")
		if n := len(alice.report().Sockets); n != 2 {
			t.Errorf("the page opened %d WebSockets, want 2", n)
		}
		alice.typeInto("#terminal", "two")
		alice.waitText(terminalRows, "TWO")
		alice.checkClean()
	})

	t.Run("ssh", func(t *testing.T) {
		t.Cleanup(func() { waitSessionFree(t, "ssh") })
		alice := b.open(t, "ssh-alice", pageURL(replicaA.URL, tokens["alice"], "ssh"))
		alice.waitState("ssh-form")
		alice.screenshot("form")
		alice.fill("#ssh-user", sshd1.User)
		alice.click("#ssh-auth-password")
		alice.fill("#ssh-password", sshd1.Password)
		alice.click("#ssh-connect")
		alice.waitState("connected")
		var left string
		alice.eval(`document.getElementById('ssh-password').value`, &left)
		if left != "" {
			t.Errorf("the password stayed in the form")
		}
		alice.waitText(terminalRows, "$") // the shell's prompt: type once it listens
		alice.typeInto("#terminal", "echo hi-$((3*3))\n")
		alice.waitText(terminalRows, "hi-9")
		alice.screenshot("ssh")
		alice.checkClean()
	})
}

// startGuest runs a QEMU of its own as VM name in team-a, running, with
// its subresources served by the stand-in virt-handler; all of it goes away
// when the test ends.
func startGuest(t *testing.T, name string) virthandler.Target {
	t.Helper()
	ctx := testContext(t)
	vm, err := qemu.Start(context.WithoutCancel(ctx), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vm.Stop() })
	always := kubevirtv1.RunStrategyAlways
	vmObj := &kubevirtv1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
		Spec: kubevirtv1.VirtualMachineSpec{RunStrategy: &always, Template: &kubevirtv1.VirtualMachineInstanceTemplateSpec{
			Spec: kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
		}},
	}
	vmi := &kubevirtv1.VirtualMachineInstance{
		ObjectMeta: metav1.ObjectMeta{Namespace: userNS, Name: name},
		Spec:       kubevirtv1.VirtualMachineInstanceSpec{Domain: kubevirtv1.DomainSpec{}},
		Status:     kubevirtv1.VirtualMachineInstanceStatus{Phase: kubevirtv1.Running},
	}
	for _, obj := range []client.Object{vmObj, vmi} {
		if err := admin.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = admin.Delete(context.WithoutCancel(ctx), obj) })
	}
	target := virthandler.Target{Console: vm.SerialSocket, VNC: vm.VNCSocket}
	handler.Register(userNS, name, target)
	t.Cleanup(func() { handler.Unregister(userNS, name) })
	return target
}

// waitReleased waits until ws1's upstream of kind is closed and its
// session free, once a test's pages have closed, so the next test finds
// both free.
func waitReleased(t *testing.T, kind virthandler.Kind) {
	t.Helper()
	deadline := time.Now().Add(releaseTimeout)
	for handler.Open(userNS, "ws1", kind) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the %s upstream of ws1 is still open %v after the pages closed", kind, releaseTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitSessionFree(t, string(kind))
}

// sessionRequests sums virtstation_bridge_session_requests_total of mode
// over both replicas: every session request, refused or not.
func sessionRequests(t *testing.T, mode string) int {
	t.Helper()
	total := 0
	for _, srv := range []string{replicaA.URL, replicaB.URL} {
		body := scrape(t, srv)
		prefix := `virtstation_bridge_session_requests_total{mode="` + mode + `",`
		for _, line := range strings.Split(body, "\n") {
			if !strings.HasPrefix(line, prefix) {
				continue
			}
			n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			total += int(n)
		}
	}
	return total
}

// waitSessionFree waits until no one holds ws1's mode, so later tests find
// it free.
func waitSessionFree(t *testing.T, mode string) {
	t.Helper()
	deadline := time.Now().Add(releaseTimeout)
	for {
		resp, body := request(t, http.MethodGet, replicaA.URL+vmPath("ws1", "sessions"), tokens["alice"])
		var list struct {
			Sessions []struct {
				Mode string `json:"mode"`
			} `json:"sessions"`
		}
		if err := json.Unmarshal([]byte(body), &list); resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("sessions: %s %s", resp.Status, body)
		}
		held := false
		for _, s := range list.Sessions {
			held = held || s.Mode == mode
		}
		if !held {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ws1's %s session is still held", mode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
