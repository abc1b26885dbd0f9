package bridge

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/internal/browser"
	"github.com/virtstation/virtstation/internal/qemu"
	"github.com/virtstation/virtstation/internal/virthandler"
)

// Real-browser tests of the built-in client: Debian's Chromium, driven by
// internal/browser (playwright-core from test/bridge/browser/driver.mjs),
// opens the page the bridge serves and works the VM's serial console,
// display and SSH through the bridge, the API server and QEMU, as a person
// would.

// releaseTimeout bounds the wait for a closed page's session to end at the
// bridge and KubeVirt; generous, for a loaded machine.
const releaseTimeout = 30 * time.Second

// noReconnectWindow is how long a taken-over page is watched for a
// reconnect attempt; the client's shortest backoff is 1 s.
const noReconnectWindow = 3 * time.Second

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
	b := browser.Start(t)

	t.Run("serial", func(t *testing.T) {
		t.Cleanup(func() { waitReleased(t, virthandler.Console) }) // after the pages close
		alice := b.Open(t, "serial-alice", pageURL(replicaA.URL, tokens["alice"], "serial"))
		alice.WaitState("connected")
		// The token left the URL and went to no persistent storage.
		var where struct {
			Href, Cookie string
			Local        int
		}
		alice.Eval(`({href: location.href, cookie: document.cookie, local: localStorage.length})`, &where)
		if strings.Contains(where.Href, tokens["alice"]) || strings.Contains(where.Href, "token") || where.Local != 0 || where.Cookie != "" {
			t.Fatalf("after sign-in: URL %q, %d localStorage items, cookie %q", where.Href, where.Local, where.Cookie)
		}
		if !strings.HasSuffix(where.Href, "/ui/namespaces/team-a/virtualmachines/ws1#mode=serial") {
			t.Errorf("URL = %q, want the VM page in serial mode", where.Href)
		}
		// Keys typed into xterm.js reach the serial line; the guest's upper-case
		// echo comes back to the screen.
		alice.TypeInto("#terminal", "hello")
		alice.WaitText(terminalRows, "HELLO")
		alice.Screenshot("echo")
		alice.CheckClean()
	})

	t.Run("display", func(t *testing.T) {
		t.Cleanup(func() { waitReleased(t, virthandler.VNC) })
		alice := b.Open(t, "display-alice", pageURL(replicaB.URL, tokens["alice"], "display"))
		alice.WaitState("connected")
		// noVNC decoded QEMU's framebuffer: the canvas has a size and shows
		// something other than one flat colour (the firmware's text).
		alice.WaitFor(`(() => {
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
		alice.Eval(`(() => { const c = document.querySelector('#screen canvas'); return {w: c.width, h: c.height}; })()`, &size)
		t.Logf("VNC framebuffer %dx%d", size.W, size.H)
		alice.Screenshot("display")
		alice.CheckClean()
	})

	t.Run("take-over", func(t *testing.T) {
		t.Cleanup(func() { waitReleased(t, virthandler.Console) })
		alice := b.Open(t, "takeover-alice", pageURL(replicaA.URL, tokens["alice"], "serial"))
		alice.WaitState("connected")
		alice.TypeInto("#terminal", "a1")
		alice.WaitText(terminalRows, "A1")

		// bob, in another browser on the other replica, is offered the
		// take-over, naming alice.
		bob := b.Open(t, "takeover-bob", pageURL(replicaB.URL, tokens["bob"], "serial"))
		if st := bob.WaitState("held"); st.Code != "4409" {
			t.Fatalf("bob's status = %+v, want held (4409)", st)
		}
		// A refusal is never shown as connected, not even for a moment.
		var states []string
		bob.Eval(`window.__states`, &states)
		if slices.Contains(states, "connected") {
			t.Fatalf("bob's page went through %q before the take-over prompt", states)
		}
		bob.WaitText("#prompt-text", "in use by "+user("alice"))
		bob.Screenshot("prompt")
		bob.Click("#takeover")
		bob.WaitState("connected")

		// alice is told who took over (her page asks the sessions list), and
		// her page stays down.
		if st := alice.WaitState("taken-over"); st.Code != "4001" {
			t.Fatalf("alice's status = %+v, want taken over (4001)", st)
		}
		alice.WaitText("#status", "taken over by "+user("bob"))
		alice.Screenshot("taken-over")
		sockets := len(alice.Report().Sockets)
		requests := sessionRequests(t, "console")
		upstream := len(handler.Calls())
		time.Sleep(noReconnectWindow)
		if n := len(alice.Report().Sockets); n != sockets {
			t.Fatalf("alice's page opened %d more WebSockets after the take-over", n-sockets)
		}
		if n := sessionRequests(t, "console"); n != requests {
			t.Fatalf("the bridges saw %d more console requests after the take-over", n-requests)
		}
		if n := len(handler.Calls()); n != upstream {
			t.Fatalf("KubeVirt saw %d more subresource calls after the take-over", n-upstream)
		}
		if st := alice.WaitState("taken-over"); st.Code != "4001" {
			t.Fatalf("alice's status changed to %+v", st)
		}

		// bob has the console now.
		bob.TypeInto("#terminal", "b2")
		bob.WaitText(terminalRows, "B2")

		// alice asks again and is offered the take-over, naming bob.
		alice.Click("#reconnect")
		alice.WaitState("held")
		alice.WaitText("#prompt-text", "in use by "+user("bob"))
		alice.Screenshot("prompt-naming-bob")
		alice.Click("#cancel")
		alice.CheckClean()
		bob.CheckClean()
	})

	t.Run("sign-in form", func(t *testing.T) {
		t.Cleanup(func() { waitReleased(t, virthandler.Console) })
		alice := b.Open(t, "signin-alice", vmPageURL(replicaA.URL, "ws1", "", "serial"))
		alice.WaitState("signed-out")
		alice.Screenshot("form")
		alice.Fill("#token", tokens["alice"])
		alice.Click("#signin")
		alice.WaitState("connected")
		// The tab keeps the token in sessionStorage only: a reload stays
		// signed in, and signing out forgets it.
		alice.Do("reload", nil)
		alice.WaitState("connected")
		alice.Click("#signout")
		alice.WaitState("signed-out")
		var stored struct{ Session, Local int }
		alice.Eval(`({session: sessionStorage.length, local: localStorage.length})`, &stored)
		if stored.Session != 0 || stored.Local != 0 {
			t.Fatalf("after sign-out: %+v items stored", stored)
		}
		alice.CheckClean()
	})

	t.Run("reconnect after a drop", func(t *testing.T) {
		// A VM of its own, so its VMI can vanish and come back.
		const name = "ws-drop"
		target := startGuest(t, name)
		alice := b.Open(t, "drop-alice", vmPageURL(replicaA.URL, name, tokens["alice"], "serial"))
		alice.WaitState("connected")
		alice.TypeInto("#terminal", "one")
		alice.WaitText(terminalRows, "ONE")

		// virt-handler goes away: the bridge closes with 4004, and the page
		// retries by itself after its first backoff (1 s).
		handler.Unregister(userNS, name)
		if st := alice.WaitState("reconnecting"); st.Code != "4004" {
			t.Fatalf("after the drop: %+v, want reconnecting (4004)", st)
		}
		handler.Register(userNS, name, target)
		alice.WaitState("connected")
		if n := len(alice.Report().Sockets); n != 2 {
			t.Errorf("the page opened %d WebSockets, want 2", n)
		}
		alice.TypeInto("#terminal", "two")
		alice.WaitText(terminalRows, "TWO")
		alice.CheckClean()
	})

	t.Run("ssh", func(t *testing.T) {
		t.Cleanup(func() { waitSessionFree(t, "ssh") })
		alice := b.Open(t, "ssh-alice", pageURL(replicaA.URL, tokens["alice"], "ssh"))
		alice.WaitState("ssh-form")
		alice.Screenshot("form")
		alice.Fill("#ssh-user", sshd1.User)
		alice.Click("#ssh-auth-password")
		alice.Fill("#ssh-password", sshd1.Password)
		alice.Click("#ssh-connect")
		alice.WaitState("connected")
		var left string
		alice.Eval(`document.getElementById('ssh-password').value`, &left)
		if left != "" {
			t.Errorf("the password stayed in the form")
		}
		alice.WaitText(terminalRows, "$") // the shell's prompt: type once it listens
		alice.TypeInto("#terminal", "echo hi-$((3*3))\n")
		alice.WaitText(terminalRows, "hi-9")
		alice.Screenshot("ssh")
		alice.CheckClean()
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
