package bridge

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/virtstation/virtstation/internal/browser"
	"github.com/virtstation/virtstation/internal/virthandler"
	"github.com/virtstation/virtstation/rfb"
)

// Real-browser tests of the display's toolbar, after noVNC's vnc.html:
// extra keys, the clipboard both ways, view only, full screen and the
// scaling mode. What the page sends is read where it lands: the stand-in
// virt-handler taps the bytes it writes to QEMU's VNC socket (inputTap).

// Keysyms the extra keys send (X11's keysymdef.h).
const (
	xkControlL = 0xffe3
	xkAltL     = 0xffe9
	xkDelete   = 0xffff
	xkF1       = 0xffbe
	xkF7       = 0xffc4
	xkSuperL   = 0xffeb
	xkTab      = 0xff09
	xkEscape   = 0xff1b
)

// tapQuiet is how long a view-only page is watched for input reaching
// QEMU: noVNC sends a key as the browser delivers it, within milliseconds.
const tapQuiet = time.Second

// screenShown is true once noVNC has drawn QEMU's screen: a canvas with
// something other than one flat colour.
const screenShown = `(() => {
	const c = document.querySelector('#screen canvas');
	if (!c || c.width < 100 || c.height < 100) return false;
	const px = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
	let differing = 0;
	for (let i = 4; i < px.length; i += 4) {
		if (px[i] !== px[0] || px[i + 1] !== px[1] || px[i + 2] !== px[2]) differing++;
	}
	return differing > 200;
})()`

func TestBrowserDisplayTools(t *testing.T) {
	b := browser.Start(t)
	const vm = "ws-tools"
	target := startGuest(t, vm)
	tap := &inputTap{}
	target.VNCTap = tap.tap
	handler.Register(userNS, vm, target)
	t.Cleanup(func() {
		if p := tap.problems(); len(p) > 0 {
			t.Errorf("the tap could not follow the RFB stream to QEMU: %q", p)
		}
	})

	t.Run("extra keys", func(t *testing.T) { testExtraKeys(t, b, tap, vm) })
	t.Run("clipboard", func(t *testing.T) { testClipboard(t, b, tap, vm, target.VNC) })
	t.Run("view only", func(t *testing.T) { testViewOnlyPage(t, b, tap, vm) })
	t.Run("view only at the bridge", func(t *testing.T) { testViewOnlyBridge(t, tap, vm) })
	t.Run("scaling and full screen", func(t *testing.T) { testScalingAndFullScreen(t, b, tap, vm) })
	t.Run("serial paste", func(t *testing.T) { testSerialPaste(t, b, vm) })
}

// testSerialPaste: text pasted into the serial console (xterm.js takes the
// browser's paste event) reaches the serial line as typed text.
func testSerialPaste(t *testing.T, b *browser.Browser, vm string) {
	u := replicaA.URL + "/ui/namespaces/" + userNS + "/virtualmachines/" + vm + "#mode=serial&token=" + url.QueryEscape(tokens["alice"])
	alice := b.Open(t, "paste-alice", u)
	alice.WaitState("connected")
	alice.Click("#terminal")
	var ignored any
	alice.Eval(`(() => {
		const data = new DataTransfer();
		data.setData('text/plain', 'pasted text');
		document.querySelector('#terminal textarea').dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
		return null;
	})()`, &ignored)
	alice.WaitText(terminalRows, "PASTED TEXT")
	alice.CheckClean()
}

// displayPage opens vm's display with the page query (?view_only=1…) and
// waits until QEMU's screen shows.
func displayPage(t *testing.T, b *browser.Browser, name, vm, query string) *browser.Tab {
	t.Helper()
	t.Cleanup(func() { waitVMReleased(t, vm) }) // runs after the page closes
	u := replicaA.URL + "/ui/namespaces/" + userNS + "/virtualmachines/" + vm + query + "#mode=display&token=" + url.QueryEscape(tokens["alice"])
	p := b.Open(t, name, u)
	p.WaitState("connected")
	p.WaitFor(screenShown)
	return p
}

func testExtraKeys(t *testing.T, b *browser.Browser, tap *inputTap, vm string) {
	alice := displayPage(t, b, "keys-alice", vm, "")
	from, _ := tap.count()
	alice.Click("#keys-button")
	alice.Screenshot("keys")
	for _, id := range []string{"ctrl-alt-del", "ctrl-alt-f1", "ctrl-alt-f7", "super", "tab", "esc"} {
		alice.Click(`#keys [data-key="` + id + `"]`)
	}
	combo := func(mods []uint32, key uint32) []string {
		var s []string
		for _, m := range mods {
			s = append(s, keyStroke(m, true))
		}
		s = append(s, keyStroke(key, true), keyStroke(key, false))
		for _, m := range slices.Backward(mods) {
			s = append(s, keyStroke(m, false))
		}
		return s
	}
	ctrlAlt := []uint32{xkControlL, xkAltL}
	want := slices.Concat(combo(ctrlAlt, xkDelete), combo(ctrlAlt, xkF1), combo(ctrlAlt, xkF7),
		combo(nil, xkSuperL), combo(nil, xkTab), combo(nil, xkEscape))
	got := waitInputs(t, tap, from, func(in []input) bool { return len(keyStrokes(in)) >= len(want) })
	if !slices.Equal(keyStrokes(got), want) {
		t.Fatalf("QEMU got the keys\n%q\nwant\n%q", keyStrokes(got), want)
	}
	alice.CheckClean()
}

func keyStroke(keysym uint32, down bool) string {
	if down {
		return fmt.Sprintf("%#x down", keysym)
	}
	return fmt.Sprintf("%#x up", keysym)
}

// keyStrokes are the key events among in.
func keyStrokes(in []input) []string {
	var s []string
	for _, e := range in {
		if e.Name == "KeyEvent" || e.Name == "QEMUExtendedKeyEvent" {
			s = append(s, keyStroke(e.Key, e.Down))
		}
	}
	return s
}

// waitInputs waits until the inputs QEMU got after the first from satisfy
// done, and returns them.
func waitInputs(t *testing.T, tap *inputTap, from int, done func([]input) bool) []input {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	for {
		in := tap.since(from)
		if done(in) {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("QEMU got only %+v", in)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testClipboard(t *testing.T, b *browser.Browser, tap *inputTap, vm, qemuVNC string) {
	// peer is another clipboard peer of QEMU's, where a guest's vdagent
	// would be: a second VNC client on QEMU's own socket.
	peer := newClipboardPeer(t, qemuVNC)
	alice := displayPage(t, b, "clipboard-alice", vm, "")
	from, _ := tap.count()

	// Browser to VM: noVNC tells QEMU it has text (extended clipboard, so
	// UTF-8 survives); QEMU fetches it when a peer asks, as a guest pasting
	// would.
	const pasted = "from the browser: ünïcødé ✓"
	alice.Click("#clipboard-button")
	alice.Fill("#clipboard-text", pasted)
	alice.Click("#clipboard-send")
	alice.WaitText("#clipboard-message", "Sent to the VM.")
	if got := peer.receive(t); got != pasted {
		t.Fatalf("QEMU's clipboard peer got %q, want %q", got, pasted)
	}
	waitInputs(t, tap, from, func(in []input) bool {
		return slices.ContainsFunc(in, func(e input) bool { return e.Name == "ClientCutText" && e.Text == pasted })
	})

	// VM to browser: the peer sets QEMU's clipboard; QEMU offers it to
	// the bridge's client (ServerCutText), and the panel shows it.
	const copied = "copied in the guest"
	peer.set(t, copied)
	alice.WaitFor(`document.getElementById('clipboard-text').value === ` + fmt.Sprintf("%q", copied))
	alice.WaitText("#clipboard-message", "From the VM.")
	alice.Screenshot("clipboard")
	alice.CheckClean()
}

// clipboardPeer is a VNC client on QEMU's socket that speaks the extended
// clipboard: QEMU tells it when the clipboard changes and gives it the text
// on request, as it would a guest's vdagent.
type clipboardPeer struct{ c net.Conn }

// Extended clipboard actions, beside clipboardText and clipboardProvide.
const (
	clipboardRequest = 1 << 25
	clipboardNotify  = 1 << 27
	// encodingExtendedClipboard is the pseudo-encoding 0xC0A1E5CE.
	encodingExtendedClipboard = -1063131698
)

func newClipboardPeer(t *testing.T, socket string) *clipboardPeer {
	t.Helper()
	c, err := net.DialTimeout("unix", socket, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	p := &clipboardPeer{c: c}
	p.read(t, 12) // RFB 003.008
	p.write(t, []byte("RFB 003.008\n"))
	if types := p.read(t, int(p.read(t, 1)[0])); !bytes.Contains(types, []byte{byte(rfb.SecurityNone)}) {
		t.Fatalf("QEMU offers security types %v, not None", types)
	}
	p.write(t, []byte{byte(rfb.SecurityNone)})
	p.read(t, 4)          // SecurityResult OK
	p.write(t, []byte{1}) // ClientInit, shared: the bridge's client stays
	head := p.read(t, 24)
	p.read(t, int(binary.BigEndian.Uint32(head[20:]))) // the name
	enc, err := rfb.EncodeSetEncodings([]int32{rfb.EncodingRaw, encodingExtendedClipboard})
	if err != nil {
		t.Fatal(err)
	}
	p.write(t, enc)
	p.cutText(t) // QEMU's clipboard capabilities
	return p
}

// set makes text QEMU's clipboard, as plain ClientCutText (Latin-1).
func (p *clipboardPeer) set(t *testing.T, text string) {
	t.Helper()
	p.write(t, wireMsg(t, rfb.ClientCutText{Text: []byte(text)}))
}

func (p *clipboardPeer) read(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if err := p.c.SetReadDeadline(time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(p.c, b); err != nil {
		t.Fatalf("QEMU's VNC socket: %v", err)
	}
	return b
}

func (p *clipboardPeer) write(t *testing.T, b []byte) {
	t.Helper()
	if _, err := p.c.Write(b); err != nil {
		t.Fatalf("QEMU's VNC socket: %v", err)
	}
}

// cutText reads the next server message, which must be an extended
// ServerCutText (the peer asks for no screen), and returns its flags and
// payload.
func (p *clipboardPeer) cutText(t *testing.T) (uint32, []byte) {
	t.Helper()
	head := p.read(t, 8)
	n := int32(binary.BigEndian.Uint32(head[4:]))
	if head[0] != 3 || n > -4 || -n > rfb.MaxCutTextLength {
		t.Fatalf("QEMU sent the clipboard peer %x, not an extended ServerCutText", head)
	}
	body := p.read(t, int(-n))
	return binary.BigEndian.Uint32(body), body[4:]
}

// receive waits for QEMU's notice that the clipboard holds text, asks for
// it, and returns it.
func (p *clipboardPeer) receive(t *testing.T) string {
	t.Helper()
	for {
		flags, _ := p.cutText(t)
		if flags&clipboardNotify != 0 && flags&clipboardText != 0 {
			break
		}
	}
	p.write(t, wireMsg(t, rfb.ClientCutText{Extended: true, Flags: clipboardRequest | clipboardText}))
	for {
		flags, payload := p.cutText(t)
		if flags&clipboardProvide != 0 {
			return providedText(flags, payload)
		}
	}
}

func testViewOnlyPage(t *testing.T, b *browser.Browser, tap *inputTap, vm string) {
	from, _ := tap.count()
	alice := displayPage(t, b, "viewonly-alice", vm, "?view_only=1")
	alice.WaitText("#status", "(view only)")
	var ui struct{ Badge, Checked, KeysOff, ClipboardOff bool }
	alice.Eval(`({
		badge: !document.getElementById('view-only-badge').hidden,
		checked: document.getElementById('view-only').checked,
		keysOff: document.getElementById('keys-button').disabled,
		clipboardOff: document.getElementById('clipboard-button').disabled,
	})`, &ui)
	if !ui.Badge || !ui.Checked || !ui.KeysOff || !ui.ClipboardOff {
		t.Fatalf("view only shows %+v", ui)
	}
	// A person clicks and types on the screen: nothing reaches QEMU.
	alice.TypeInto("#screen canvas", "abc")
	time.Sleep(tapQuiet)
	if in := tap.since(from); len(in) > 0 {
		t.Fatalf("a view-only page sent QEMU %+v", in)
	}
	alice.Screenshot("view-only")

	// Leaving view only opens the display again with control; the URL,
	// which had chosen view only, keeps the new choice.
	alice.Click("#settings-button")
	alice.Click("#view-only")
	alice.WaitFor(`(() => {
		const s = document.getElementById('status');
		return s.dataset.state === 'connected' && !s.textContent.includes('view only');
	})()`)
	var search string
	alice.Eval(`location.search`, &search)
	if search != "?view_only=0" {
		t.Errorf("after leaving view only the query is %q", search)
	}
	alice.Click("#settings-button") // close the drawer, off the screen
	alice.TypeInto("#screen canvas", "x")
	waitInputs(t, tap, from, func(in []input) bool { return slices.Contains(keyStrokes(in), keyStroke('x', false)) })
	alice.CheckClean()
}

// testViewOnlyBridge shows the bridge, not only the page, enforces view
// only: a client that opened the session with ?view_only=1 and sends
// input anyway gets the screen, and QEMU gets none of the input.
func testViewOnlyBridge(t *testing.T, tap *inputTap, vm string) {
	key := wireMsg(t, rfb.KeyEvent{Down: true, Key: 'q'})
	inputs := slices.Concat(key,
		wireMsg(t, rfb.PointerEvent{Buttons: 1, X: 5, Y: 5}),
		wireMsg(t, rfb.ClientCutText{Text: []byte("not from a viewer")}))
	for _, viewOnly := range []bool{true, false} {
		from, _ := tap.count()
		query := "?view_only=1"
		if !viewOnly {
			query = ""
		}
		rc := newRFBClientFor(t, replicaA.URL, vm, query)
		rc.send(inputs)
		rc.request(false)
		if _, err := rc.update(ioTimeout); err != nil {
			t.Fatalf("view only %v: no screen after the input: %v", viewOnly, err)
		}
		if viewOnly {
			// The update request after the input has reached QEMU: so
			// would the input have.
			if in := tap.since(from); len(in) > 0 {
				t.Fatalf("the bridge let a view-only session send QEMU %+v", in)
			}
		} else {
			waitInputs(t, tap, from, func(in []input) bool { return len(in) == 3 })
		}
		_ = rc.c.Close()
		waitVMReleased(t, vm)
	}
}

// wireMsg is m's bytes on the wire.
func wireMsg(t *testing.T, m interface{ AppendBinary([]byte) ([]byte, error) }) []byte {
	t.Helper()
	b, err := m.AppendBinary(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fitsScreen is true when the canvas, as shown, fills the screen's area
// along one side and fits inside it along the other: scaled to fit.
const fitsScreen = `(() => {
	const s = document.getElementById('screen').getBoundingClientRect();
	const c = document.querySelector('#screen canvas').getBoundingClientRect();
	const near = (a, b) => Math.abs(a - b) < 2;
	return (near(c.width, s.width) && c.height <= s.height + 1) || (near(c.height, s.height) && c.width <= s.width + 1);
})()`

// unscaled is true when the canvas shows one framebuffer pixel per CSS pixel.
const unscaled = `(() => {
	const c = document.querySelector('#screen canvas');
	return c && Math.abs(c.getBoundingClientRect().width - c.width) < 1;
})()`

func testScalingAndFullScreen(t *testing.T, b *browser.Browser, tap *inputTap, vm string) {
	alice := displayPage(t, b, "scaling-alice", vm, "")
	// Local scaling is the default, and follows the window.
	alice.WaitFor(fitsScreen)
	var before float64
	alice.Eval(`document.querySelector('#screen canvas').getBoundingClientRect().width`, &before)
	alice.Do("viewport", map[string]any{"width": 640, "height": 480})
	alice.WaitFor(fitsScreen + ` && document.querySelector('#screen canvas').getBoundingClientRect().width < ` + fmt.Sprint(before-50))

	// Scaling mode None: one pixel per pixel, kept in this browser.
	alice.Click("#settings-button")
	alice.Do("select", map[string]any{"selector": "#resize", "value": "off"})
	alice.WaitFor(unscaled)
	var stored string
	alice.Eval(`localStorage.getItem('virtstation.display')`, &stored)
	if stored != `{"resize":"off","viewOnly":false}` {
		t.Fatalf("stored settings = %q", stored)
	}
	alice.Do("reload", nil)
	alice.WaitState("connected")
	alice.WaitFor(screenShown + ` && ` + unscaled + ` && document.getElementById('resize').value === 'off'`)

	// Remote resizing asks QEMU for the screen's size (SetDesktopSize);
	// QEMU's std VGA keeps its own, which the page shows unscaled.
	from, _ := tap.count()
	alice.Click("#settings-button")
	alice.Do("select", map[string]any{"selector": "#resize", "value": "remote"})
	waitInputs(t, tap, from, func(in []input) bool {
		return slices.ContainsFunc(in, func(e input) bool { return e.Name == "SetDesktopSize" })
	})
	alice.WaitFor(unscaled)
	alice.Click("#settings-button")

	// Full screen takes the screen and its toolbar.
	alice.Click("#fullscreen")
	alice.WaitFor(`document.fullscreenElement === document.getElementById('stage') && document.getElementById('fullscreen').getAttribute('aria-pressed') === 'true'`)
	// Esc is the browser's own way out, which headless Chromium lacks: the
	// button leaves too.
	alice.Click("#fullscreen")
	alice.WaitFor(`!document.fullscreenElement && document.getElementById('fullscreen').getAttribute('aria-pressed') === 'false'`)
	alice.CheckClean()
}

// waitVMReleased waits until vm's VNC upstream is closed and no one holds
// its display session, so the next test finds both free.
func waitVMReleased(t *testing.T, vm string) {
	t.Helper()
	deadline := time.Now().Add(releaseTimeout)
	for handler.Open(userNS, vm, virthandler.VNC) > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the VNC upstream of %s is still open %v after its client went", vm, releaseTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for {
		resp, body := request(t, http.MethodGet, replicaA.URL+vmPath(vm, "sessions"), tokens["alice"])
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("sessions of %s: %s %s", vm, resp.Status, body)
		}
		if !bytes.Contains([]byte(body), []byte(`"mode":"vnc"`)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the display session of %s is still held", vm)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
