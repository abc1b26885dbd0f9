package qemu

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// ioTimeout bounds each exchange with the guest; the echo takes
// milliseconds, the idle banner half a second.
const ioTimeout = 10 * time.Second

var testVM *VM

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "qemu")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(dir) }()
	testVM, err = Start(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = testVM.Stop() }()
	return m.Run()
}

func TestBootSectorLayout(t *testing.T) {
	b := bootSector()
	if len(b) != sectorSize {
		t.Fatalf("boot sector is %d bytes, want %d", len(b), sectorSize)
	}
	if got := binary.LittleEndian.Uint16(b[sectorSize-2:]); got != bootSignature {
		t.Errorf("signature %#04x, want %#04x", got, bootSignature)
	}
	if len(echoCode) != bannerOffset {
		t.Errorf("code is %d bytes but the banner is addressed at %#x", len(echoCode), bannerOffset)
	}
	if got := string(b[bannerOffset : bannerOffset+len(Banner)+1]); got != Banner+"\x00" {
		t.Errorf("banner in sector %q, want %q NUL-terminated", got, Banner)
	}
	// Absolute addresses baked into instructions: mov si, banner and the IVT entry.
	if got := binary.LittleEndian.Uint16(b[0x33:]); got != loadAddress+bannerOffset {
		t.Errorf("mov si operand %#04x, want %#04x", got, loadAddress+bannerOffset)
	}
	if got := binary.LittleEndian.Uint16(b[0x0F:]); got != loadAddress+irq4Offset {
		t.Errorf("IRQ4 vector %#04x, want %#04x", got, loadAddress+irq4Offset)
	}
	if b[irq4Offset] != 0x50 || b[bannerOffset-1] != 0xCF {
		t.Errorf("irq4 handler must start with push ax and end with iret right before the banner")
	}
}

func TestMovingSectorLayout(t *testing.T) {
	b := movingSector()
	if len(b) != sectorSize || len(movingCode) > sectorSize-2 {
		t.Fatalf("boot sector is %d bytes with %d of code, want %d", len(b), len(movingCode), sectorSize)
	}
	if got := binary.LittleEndian.Uint16(b[sectorSize-2:]); got != bootSignature {
		t.Errorf("signature %#04x, want %#04x", got, bootSignature)
	}
	// The loop bounds are the mode's size: cmp cx, 320 and cmp bx, 200.
	if got := binary.LittleEndian.Uint16(b[0x2B:]); got != mode13hWidth {
		t.Errorf("column bound %d, want %d", got, mode13hWidth)
	}
	if got := binary.LittleEndian.Uint16(b[0x32:]); got != mode13hHeight {
		t.Errorf("row bound %d, want %d", got, mode13hHeight)
	}
}

// TestMovingScreenStarts: the moving guest keeps repainting (its frame
// marks keep coming), QEMU shows its mode at the advertised size, and
// QEMU's CPU time can be read.
func TestMovingScreenStarts(t *testing.T) {
	vm, err := StartWith(t.Context(), t.TempDir(), Options{Guest: MovingScreen})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vm.Stop() })
	serial, err := net.Dial("unix", vm.SerialSocket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = serial.Close() })
	expect(t, serial, strings.Repeat(string(FrameMark), 5))
	w, h, err := vm.ScreenSize(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if w != MovingScreenWidth || h != MovingScreenHeight {
		t.Errorf("screen %dx%d, want %dx%d", w, h, MovingScreenWidth, MovingScreenHeight)
	}
	if cpu, err := vm.CPUTime(); err != nil || cpu <= 0 {
		t.Errorf("QEMU's CPU time %v, %v; want some", cpu, err)
	}
}

func TestStartWithRejectsUnknownGuest(t *testing.T) {
	if _, err := StartWith(t.Context(), t.TempDir(), Options{Guest: Guest(42)}); err == nil || !strings.Contains(err.Error(), "unknown guest") {
		t.Fatalf("StartWith an unknown guest: %v, want an unknown-guest error", err)
	}
}

func TestSerialEcho(t *testing.T) {
	cases := map[string]struct {
		send, want string
	}{
		"lower case becomes upper case": {send: "abc", want: "ABC"},
		"the whole alphabet":            {send: "the quick brown fox jumps over the lazy dog", want: "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG"},
		"everything else is unchanged":  {send: "Hi, 42 {}`@[\r\n", want: "HI, 42 {}`@[\r\n"},
		"bytes above ASCII pass":        {send: "\x00\x7f\x80\xff", want: "\x00\x7f\x80\xff"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			conn := dialSerial(t)
			expect(t, conn, Banner)
			if _, err := conn.Write([]byte(tc.send)); err != nil {
				t.Fatal(err)
			}
			expect(t, conn, tc.want)
		})
	}
}

func TestSerialBannerRepeatsForEachClient(t *testing.T) {
	for i := range 2 {
		conn := dialSerial(t)
		expect(t, conn, Banner)
		if err := conn.Close(); err != nil {
			t.Fatalf("client %d: %v", i, err)
		}
	}
}

func TestSerialLargeInput(t *testing.T) {
	// A paste larger than the UART FIFO: every byte must come back, in order.
	conn := dialSerial(t)
	expect(t, conn, Banner)
	send := strings.Repeat("0123456789abcdefghijklmnopqrstuvwxyz", 32)
	if _, err := conn.Write([]byte(send)); err != nil {
		t.Fatal(err)
	}
	expect(t, conn, strings.ToUpper(send))
}

func TestVNCGreeting(t *testing.T) {
	conn, err := net.Dial("unix", testVM.VNCSocket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.SetDeadline(time.Now().Add(ioTimeout)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, len(rfbVersion))
	if _, err := io.ReadFull(conn, buf); err != nil {
		t.Fatal(err)
	}
	if string(buf) != "RFB 003.008\n" {
		t.Fatalf("greeting %q, want %q", buf, "RFB 003.008\n")
	}
}

func TestStartRejectsLongDirectory(t *testing.T) {
	_, err := Start(t.Context(), "/"+strings.Repeat("d", 100))
	if err == nil || !strings.Contains(err.Error(), "too long") {
		t.Fatalf("Start with a long directory: %v, want a too-long error", err)
	}
}

func TestStopRemovesFiles(t *testing.T) {
	vm, err := Start(t.Context(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := vm.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := vm.Stop(); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	for _, f := range []string{vm.VNCSocket, vm.SerialSocket, vm.QMPSocket} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s still exists after Stop (stat: %v)", f, err)
		}
	}
}

func dialSerial(t *testing.T) net.Conn {
	t.Helper()
	conn, err := net.Dial("unix", testVM.SerialSocket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// expect reads conn until want has arrived.
func expect(t *testing.T, conn net.Conn, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), ioTimeout)
	defer cancel()
	if got, err := readUntil(ctx, conn, want); err != nil {
		t.Fatalf("waiting for %q: %v (got %q)", want, err, got)
	}
}
