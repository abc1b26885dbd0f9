package qemu

// The moving-screen guest's display as QEMU's VNC server reports it in
// ServerInit once the guest has switched to VGA mode 13h: QEMU doubles the
// mode's 320x200 pixels in both directions. (The BIOS text screen before
// it is 720x400.)
const (
	MovingScreenWidth  = 640
	MovingScreenHeight = 400
)

// FrameMark is the byte the moving guest writes on its serial line after
// each repaint: the first one says the screen is moving; counting them
// counts the guest's frames.
const FrameMark = '*'

// The mode's own size, which the guest's loops walk.
const (
	mode13hWidth  = 320
	mode13hHeight = 200
)

// movingCode is a guest that switches the VGA to mode 13h (320x200, 256
// colours) and, on every BIOS timer tick (18.2 Hz), repaints every pixel
// with colour x+y+ticks: diagonal bands of all 256 palette colours, moving
// by one colour a tick. Every pixel changes on every tick, so each
// framebuffer update a VNC client gets covers the whole screen: the worst
// case of a busy desktop (video, a scrolling terminal) and JPEG's best
// case. Hand-assembled 16-bit real mode (GNU as syntax in the comments,
// Intel operand order); write movingSector() to a file and disassemble it with
// `objdump -D -b binary -m i8086 -M intel FILE` to review. After each
// repaint it writes FrameMark on COM1.
var movingCode = []byte{
	0xFA,       // cli
	0x31, 0xC0, // xor ax, ax
	0x8E, 0xD8, // mov ds, ax  ; the BIOS tick count is at 0000:046C
	0x8E, 0xD0, // mov ss, ax
	0xBC, 0x00, 0x7C, // mov sp, 0x7C00
	0xFB,             // sti
	0xB8, 0x13, 0x00, // mov ax, 0x0013  ; video mode 13h
	0xCD, 0x10, // int 0x10
	0xB8, 0x00, 0xA0, // mov ax, 0xA000  ; its framebuffer
	0x8E, 0xC0, // mov es, ax
	0xFC, // cld
	// frame: (0x16)
	0xF4,                   // hlt  ; until the next timer tick
	0x8B, 0x16, 0x6C, 0x04, // mov dx, [0x046C]  ; ticks
	0x31, 0xFF, // xor di, di
	0x31, 0xDB, // xor bx, bx  ; y
	// row: (0x1F)
	0x31, 0xC9, // xor cx, cx  ; x
	// col: (0x21)
	0x88, 0xC8, // mov al, cl
	0x00, 0xD8, // add al, bl
	0x00, 0xD0, // add al, dl
	0xAA,                   // stosb  ; es:[di++] = x+y+ticks
	0x41,                   // inc cx
	0x81, 0xF9, 0x40, 0x01, // cmp cx, 320
	0x72, 0xF2, // jb col
	0x43,                   // inc bx
	0x81, 0xFB, 0xC8, 0x00, // cmp bx, 200
	0x72, 0xE9, // jb row
	// painted: (0x36)
	0xBA, 0xF8, 0x03, // mov dx, 0x3F8  ; COM1's THR (dx is reloaded at frame)
	0xB0, FrameMark, // mov al, FrameMark
	0xEE,       // out dx, al  ; one byte, QEMU's UART needs no set-up for it
	0xEB, 0xD8, // jmp frame
}

// movingSector returns the moving guest's 512-byte boot sector: code, zero
// padding and the signature.
func movingSector() []byte {
	b := make([]byte, sectorSize)
	copy(b, movingCode)
	b[sectorSize-2] = bootSignature & 0xFF
	b[sectorSize-1] = bootSignature >> 8
	return b
}
