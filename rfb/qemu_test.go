package rfb_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/virtstation/virtstation/internal/qemu"
	"github.com/virtstation/virtstation/rfb"
)

// These tests drive QEMU's real VNC server (Debian qemu-system-x86, as in
// virt-launcher) with the package's own parsers on both directions: the
// test writes the client's bytes, feeding each message to a ClientParser
// before sending it, and a ServerTracker follows everything QEMU answers.

// qemuIOTimeout bounds each wait for QEMU: a full-screen update takes
// milliseconds; a loaded 2-core CI machine running TCG guests is slower.
const qemuIOTimeout = 20 * time.Second

var (
	sharedVMOnce sync.Once
	sharedVM     *qemu.VM
	sharedVMDir  string
	sharedVMErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedVM != nil {
		if err := sharedVM.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	if sharedVMDir != "" {
		if err := os.RemoveAll(sharedVMDir); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}
	os.Exit(code)
}

// textVM returns the QEMU of internal/qemu (the design's command line: VGA in
// text mode behind a VNC unix socket, no lossy), started once for all tests.
func textVM(t *testing.T) *qemu.VM {
	t.Helper()
	sharedVMOnce.Do(func() {
		sharedVMDir, sharedVMErr = os.MkdirTemp("", "rfb")
		if sharedVMErr != nil {
			return
		}
		sharedVM, sharedVMErr = qemu.Start(context.Background(), sharedVMDir)
	})
	if sharedVMErr != nil {
		t.Fatal(sharedVMErr)
	}
	return sharedVM
}

// vncClient is a test RFB client whose two directions go through the
// package's parsers.
type vncClient struct {
	t       *testing.T
	conn    net.Conn
	parser  *rfb.ClientParser
	tracker *rfb.ServerTracker
	pending []rfb.Event
	init    rfb.ServerInit
	seen    map[int32]int // rectangles framed, by encoding
}

func dialVNC(t *testing.T, socket string) *vncClient {
	t.Helper()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	s := rfb.NewSession()
	return &vncClient{t: t, conn: conn, parser: rfb.NewClientParser(s), tracker: rfb.NewServerTracker(s), seen: map[int32]int{}}
}

// send encodes body, feeds it to the client parser (as the bridge would,
// before forwarding) and writes it.
func (c *vncClient) send(body rfb.Body) {
	c.t.Helper()
	raw, err := body.AppendBinary(nil)
	if err != nil {
		c.t.Fatal(err)
	}
	n := 0
	if err := c.parser.Feed(raw, func(m rfb.Message) error { n++; return nil }); err != nil || n != 1 {
		c.t.Fatalf("the client parser took %s as %d messages: %v", body.Name(), n, err)
	}
	if _, err := c.conn.Write(raw); err != nil {
		c.t.Fatal(err)
	}
}

// next returns the next server event, reading from QEMU as needed.
func (c *vncClient) next() rfb.Event {
	c.t.Helper()
	buf := make([]byte, 64<<10)
	for len(c.pending) == 0 {
		if err := c.conn.SetReadDeadline(time.Now().Add(qemuIOTimeout)); err != nil {
			c.t.Fatal(err)
		}
		n, err := c.conn.Read(buf)
		if ferr := c.tracker.Feed(buf[:n], func(e rfb.Event) { c.pending = append(c.pending, e) }); ferr != nil {
			c.t.Fatalf("tracking QEMU: %v", ferr)
		}
		if err != nil && len(c.pending) == 0 {
			c.t.Fatalf("reading from QEMU: %v", err)
		}
	}
	e := c.pending[0]
	c.pending = c.pending[1:]
	return e
}

// expect returns the next event, which must be of kind k.
func (c *vncClient) expect(k rfb.EventKind) rfb.Event {
	c.t.Helper()
	e := c.next()
	if e.Kind != k {
		c.t.Fatalf("event %v (%+v), want %v", e.Kind, e, k)
	}
	return e
}

// handshake performs RFB 3.8 with security None, as noVNC does with QEMU.
func (c *vncClient) handshake() {
	c.t.Helper()
	if v := c.expect(rfb.EventServerVersion).Version; v != (rfb.ProtocolVersion{Major: 3, Minor: 8}) {
		c.t.Fatalf("QEMU offers RFB %s", v)
	}
	c.send(rfb.ProtocolVersion{Major: 3, Minor: 8})
	if types := c.expect(rfb.EventSecurityTypes).SecurityTypes; !slices.Contains(types, rfb.SecurityNone) {
		c.t.Fatalf("QEMU offers security types %v", types)
	}
	c.send(rfb.SecurityChoice{Type: rfb.SecurityNone})
	if !c.expect(rfb.EventSecurityResult).OK {
		c.t.Fatal("QEMU refused security None")
	}
	c.send(rfb.ClientInit{Shared: true})
	c.init = c.expect(rfb.EventServerInit).Init
	if c.parser.Phase() != rfb.PhaseNormal || c.tracker.Phase() != rfb.PhaseNormal {
		c.t.Fatalf("after the handshake: client %v, server %v", c.parser.Phase(), c.tracker.Phase())
	}
}

// update is one FramebufferUpdate as the tracker framed it.
type update struct {
	start, end rfb.Event
	rects      []rfb.Rect
}

// nextUpdate returns the next FramebufferUpdate, skipping other messages.
func (c *vncClient) nextUpdate() update {
	c.t.Helper()
	var u update
	for {
		e := c.next()
		switch e.Kind {
		case rfb.EventUpdateStart:
			u = update{start: e}
		case rfb.EventRect:
			u.rects = append(u.rects, e.Rect)
			c.seen[e.Rect.Encoding]++
		case rfb.EventUpdateEnd:
			u.end = e
			return u
		}
	}
}

// isPixels reports whether a rectangle carries pixels (it is not a
// pseudo-encoding).
func isPixels(r rfb.Rect) bool {
	return r.Encoding >= 0 && r.Encoding < 0x100 || r.Encoding == rfb.EncodingTightPNG
}

// pixelArea is the area the update's pixel rectangles cover.
func (u update) pixelArea() int {
	a := 0
	for _, r := range u.rects {
		if isPixels(r) {
			a += int(r.Width) * int(r.Height)
		}
	}
	return a
}

// fullUpdate requests the whole screen and returns the update that paints
// it, after any pseudo-encoding-only updates QEMU sends on its own (the
// ExtendedKeyEvent acknowledgement, ExtendedDesktopSize, the cursor).
func (c *vncClient) fullUpdate() update {
	c.t.Helper()
	w, h := c.tracker.Session().FramebufferSize()
	c.send(rfb.FramebufferUpdateRequest{Width: w, Height: h})
	for {
		u := c.nextUpdate()
		if u.pixelArea() > 0 {
			if got, want := u.pixelArea(), int(w)*int(h); got != want {
				c.t.Fatalf("the full update paints %d pixels, want %dx%d = %d: %+v", got, w, h, want, u.rects)
			}
			return u
		}
	}
}

func checkUpdate(t *testing.T, u update, width, height uint16) {
	t.Helper()
	total := int64(4)
	for _, r := range u.rects {
		total += r.Bytes
		if isPixels(r) && (int(r.X)+int(r.Width) > int(width) || int(r.Y)+int(r.Height) > int(height)) {
			t.Errorf("rectangle %+v outside the %dx%d screen", r, width, height)
		}
	}
	if u.end.Bytes != total || u.end.Rects != len(u.rects) || u.start.Rects < len(u.rects) {
		t.Errorf("update start %+v, end %+v, rectangles %d adding up to %d bytes", u.start, u.end, len(u.rects), total)
	}
}

func encodingsOf(u update) []int32 {
	var encs []int32
	for _, r := range u.rects {
		if !slices.Contains(encs, r.Encoding) {
			encs = append(encs, r.Encoding)
		}
	}
	return encs
}

// pseudo is what a browser client lists after its encodings.
var pseudo = []int32{rfb.EncodingDesktopSize, rfb.EncodingExtendedDesktopSize, rfb.EncodingLastRect, rfb.EncodingQEMUExtendedKeyEvent}

// TestQEMUFramesFullUpdates: for each encoding QEMU implements, the
// tracker frames QEMU's full-screen update (start, every rectangle, end)
// in exactly the bytes QEMU sent, at the ServerInit size, and then the
// next one. (QEMU picks the first encoding it supports in the client's
// list, and prefers ZRLE to zlib wherever they are listed.)
func TestQEMUFramesFullUpdates(t *testing.T) {
	vm := textVM(t)
	cases := map[string]struct {
		ask  []int32
		want int32
	}{
		"a browser's list":            {[]int32{rfb.EncodingTight, rfb.EncodingZRLE, rfb.EncodingHextile, rfb.EncodingCopyRect, rfb.EncodingRaw}, rfb.EncodingTight},
		"Tight":                       {[]int32{rfb.EncodingTight}, rfb.EncodingTight},
		"TightPNG":                    {[]int32{rfb.EncodingTightPNG}, rfb.EncodingTightPNG},
		"ZRLE":                        {[]int32{rfb.EncodingZRLE}, rfb.EncodingZRLE},
		"zlib":                        {[]int32{rfb.EncodingZlib}, rfb.EncodingZlib},
		"zlib before ZRLE gives ZRLE": {[]int32{rfb.EncodingZlib, rfb.EncodingZRLE}, rfb.EncodingZRLE},
		"Hextile":                     {[]int32{rfb.EncodingHextile}, rfb.EncodingHextile},
		"Raw":                         {[]int32{rfb.EncodingRaw}, rfb.EncodingRaw},
		"CopyRect alone gives Raw":    {[]int32{rfb.EncodingCopyRect}, rfb.EncodingRaw},
		// Without lossy=on QEMU turns ZYWRLE (lossy wavelet ZRLE) into
		// plain ZRLE, and labels the rectangles so.
		"ZYWRLE gives ZRLE": {[]int32{rfb.EncodingZYWRLE}, rfb.EncodingZRLE},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialVNC(t, vm.VNCSocket)
			c.handshake()
			if w, h := c.tracker.Session().FramebufferSize(); w != c.init.Width || h != c.init.Height || w == 0 || h == 0 {
				t.Fatalf("session size %dx%d, ServerInit %dx%d", w, h, c.init.Width, c.init.Height)
			}
			c.send(rfb.SetEncodings{Encodings: slices.Concat(tc.ask, pseudo)})
			u := c.fullUpdate()
			checkUpdate(t, u, c.init.Width, c.init.Height)
			for _, r := range u.rects {
				if r.Encoding != tc.want {
					t.Errorf("rectangle %+v, want encoding %d", r, tc.want)
				}
			}
			t.Logf("QEMU %dx%d %q, asked for %s: %d rectangles, %d bytes, encodings %v, Tight methods %v",
				c.init.Width, c.init.Height, c.init.Name, name, len(u.rects), u.end.Bytes, encodingsOf(u), tightMethods(u))
			// QEMU acknowledged the ExtendedKeyEvent pseudo-encoding and
			// answered the full request with an ExtendedDesktopSize, each in
			// an update of its own, which the tracker framed too.
			if c.seen[rfb.EncodingQEMUExtendedKeyEvent] != 1 || c.seen[rfb.EncodingExtendedDesktopSize] != 1 {
				t.Errorf("pseudo-rectangles framed: %v", c.seen)
			}
			// The stream is still framed: a second full update comes out whole.
			checkUpdate(t, c.fullUpdate(), c.init.Width, c.init.Height)
		})
	}
}

// TestQEMURawUpdateSize: with Raw alone, an update is exactly its 4-byte
// header, a 12-byte header per rectangle and width*height pixels, at the
// server's 4 bytes per pixel and, after SetPixelFormat, at 2.
func TestQEMURawUpdateSize(t *testing.T) {
	vm := textVM(t)
	rgb565 := rfb.PixelFormat{BitsPerPixel: 16, Depth: 16, TrueColour: true, RedMax: 31, GreenMax: 63, BlueMax: 31, RedShift: 11, GreenShift: 5}
	cases := map[string]struct {
		format *rfb.PixelFormat
		bpp    int64
	}{
		"server format, 32 bits": {nil, 4},
		"SetPixelFormat 16 bits": {&rgb565, 2},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			c := dialVNC(t, vm.VNCSocket)
			c.handshake()
			if c.init.Format.BitsPerPixel != 32 {
				t.Fatalf("QEMU's pixel format %+v", c.init.Format)
			}
			if tc.format != nil {
				c.send(rfb.SetPixelFormat{Format: *tc.format})
			}
			c.send(rfb.SetEncodings{Encodings: []int32{rfb.EncodingRaw}})
			u := c.fullUpdate()
			checkUpdate(t, u, c.init.Width, c.init.Height)
			want := 4 + 12*int64(len(u.rects)) + int64(c.init.Width)*int64(c.init.Height)*tc.bpp
			if u.end.Bytes != want {
				t.Errorf("update of %d bytes in %d rectangles, want %d", u.end.Bytes, len(u.rects), want)
			}
		})
	}
}

func tightMethods(u update) map[string]int {
	m := map[string]int{}
	for _, r := range u.rects {
		if r.Tight != rfb.TightNone {
			m[r.Tight.String()]++
		}
	}
	return m
}

// jpegQuality asks for JPEG at quality level 5 of 0..9.
var jpegQuality = rfb.EncodingJPEGQuality0 + 5

// TestQEMUTextScreenWithJPEGQuality: on the design's QEMU (no lossy) the
// Tight full update of the text screen has no JPEG rectangle though the
// client asked for a JPEG quality. A text screen has few colours, so this
// alone does not show that lossy decides; TestQEMUJPEGNeedsLossy does.
func TestQEMUTextScreenWithJPEGQuality(t *testing.T) {
	c := dialVNC(t, textVM(t).VNCSocket)
	c.handshake()
	c.send(rfb.SetEncodings{Encodings: append([]int32{rfb.EncodingTight, jpegQuality, rfb.EncodingCompressLevel0 + 6, rfb.EncodingRaw}, pseudo...)})
	u := c.fullUpdate()
	checkUpdate(t, u, c.init.Width, c.init.Height)
	if n := tightMethods(u)["jpeg"]; n != 0 {
		t.Errorf("%d JPEG rectangles without lossy", n)
	}
	t.Logf("text screen, Tight with JPEG quality 5: Tight methods %v", tightMethods(u))
}

// TestQEMUJPEGNeedsLossy settles whether QEMU uses JPEG for a client that
// asks for it (Tight plus a JPEG quality level) when its display does not
// have lossy=on, as KubeVirt's does not. Two QEMUs run a guest that
// repaints the whole VGA screen with 256 colours 18 times a second (JPEG's
// best case: QEMU forces JPEG for areas updated that often), one with the
// design's command line and one with lossy=on; the same client watches
// each for a few seconds.
func TestQEMUJPEGNeedsLossy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two QEMUs for several seconds")
	}
	// Without lossy, watch a fixed time; with it, until the first JPEG
	// rectangle (a loaded machine repaints more slowly).
	const watch, patience = 3 * time.Second, 30 * time.Second
	counts := map[bool]map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, lossy := range []bool{false, true} {
		socket := startAnimatedQEMU(t, lossy)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var m map[string]int
			if lossy {
				m = watchTight(t, "lossy=on", socket, patience, true)
			} else {
				m = watchTight(t, "no lossy", socket, watch, false)
			}
			mu.Lock()
			counts[lossy] = m
			mu.Unlock()
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	t.Logf("Tight rectangles by method: without lossy, over %v: %v; with lossy=on, until the first JPEG: %v", watch, counts[false], counts[true])
	if counts[false]["jpeg"] != 0 {
		t.Errorf("QEMU without lossy sent %d JPEG rectangles", counts[false]["jpeg"])
	}
	if counts[false]["basic"]+counts[false]["fill"] == 0 {
		t.Errorf("QEMU without lossy sent no Tight rectangles at all: %v", counts[false])
	}
	if counts[true]["jpeg"] == 0 {
		t.Errorf("QEMU with lossy=on sent no JPEG either in %v (%v): the guest does not exercise JPEG, so the test proves nothing", patience, counts[true])
	}
}

// watchTight connects, asks for Tight with a JPEG quality, and keeps
// requesting incremental updates for d (or until a JPEG rectangle, if
// untilJPEG), counting Tight methods. It may run in its own goroutine: it
// reports failures with Error and returns.
func watchTight(t *testing.T, name, socket string, d time.Duration, untilJPEG bool) map[string]int {
	counts := map[string]int{}
	ok := t.Run(name, func(t *testing.T) {
		c := dialVNC(t, socket)
		c.handshake()
		c.send(rfb.SetEncodings{Encodings: append([]int32{rfb.EncodingTight, jpegQuality, rfb.EncodingRaw}, pseudo...)})
		deadline := time.Now().Add(d)
		incremental := false
		for time.Now().Before(deadline) && (!untilJPEG || counts["jpeg"] == 0) {
			w, h := c.tracker.Session().FramebufferSize()
			c.send(rfb.FramebufferUpdateRequest{Incremental: incremental, Width: w, Height: h})
			incremental = true
			u := c.nextUpdate()
			w, h = c.tracker.Session().FramebufferSize()
			checkUpdate(t, u, w, h)
			for k, n := range tightMethods(u) {
				counts[k] += n
			}
		}
	})
	if !ok {
		t.Errorf("watching QEMU with %s failed", name)
	}
	return counts
}

// startAnimatedQEMU runs internal/qemu's moving-screen guest, which repaints
// the whole VGA screen with 256 colours 18 times a second, with the
// design's display options, plus lossy=on if asked, and returns its VNC
// socket.
func startAnimatedQEMU(t *testing.T, lossy bool) string {
	t.Helper()
	vm, err := qemu.StartWith(context.WithoutCancel(t.Context()), t.TempDir(), qemu.Options{Guest: qemu.MovingScreen, LossyVNC: lossy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := vm.Stop(); err != nil {
			t.Error(err)
		}
	})
	return vm.VNCSocket
}
