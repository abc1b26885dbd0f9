package qemu

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
)

// rfbSecurityNone is RFB's security type None, QEMU's without a password.
const rfbSecurityNone = 1

// ScreenSize performs an RFB 3.8 handshake with security None on the VNC
// socket, as far as ServerInit, and returns the framebuffer size QEMU
// reports: the size of its display.
func (vm *VM) ScreenSize(ctx context.Context) (width, height uint16, err error) {
	conn, err := vm.dial(ctx, vm.VNCSocket)
	if err != nil {
		return 0, 0, err
	}
	defer func() { _ = conn.Close() }()
	if deadline, ok := ctx.Deadline(); ok {
		if err := conn.SetDeadline(deadline); err != nil {
			return 0, 0, err
		}
	}
	var version [len(rfbVersion)]byte
	if _, err := io.ReadFull(conn, version[:]); err != nil {
		return 0, 0, fmt.Errorf("qemu: read RFB version: %w", err)
	}
	if _, err := io.WriteString(conn, rfbVersion); err != nil {
		return 0, 0, err
	}
	types, err := readCounted(conn)
	if err != nil {
		return 0, 0, fmt.Errorf("qemu: read security types: %w", err)
	}
	if !slices.Contains(types, rfbSecurityNone) {
		return 0, 0, fmt.Errorf("qemu: security types %v lack None", types)
	}
	if _, err := conn.Write([]byte{rfbSecurityNone}); err != nil {
		return 0, 0, err
	}
	var result [4]byte
	if _, err := io.ReadFull(conn, result[:]); err != nil {
		return 0, 0, fmt.Errorf("qemu: read security result: %w", err)
	}
	if binary.BigEndian.Uint32(result[:]) != 0 {
		return 0, 0, fmt.Errorf("qemu: security None refused")
	}
	if _, err := conn.Write([]byte{1}); err != nil { // ClientInit, shared
		return 0, 0, err
	}
	var size [4]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return 0, 0, fmt.Errorf("qemu: read ServerInit: %w", err)
	}
	return binary.BigEndian.Uint16(size[:2]), binary.BigEndian.Uint16(size[2:]), nil
}

// readCounted reads a one-byte count and that many bytes.
func readCounted(r io.Reader) ([]byte, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	b := make([]byte, n[0])
	_, err := io.ReadFull(r, b)
	return b, err
}
