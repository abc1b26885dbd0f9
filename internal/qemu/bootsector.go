package qemu

// Banner is what the guest writes on its serial line at boot and whenever the
// line has been idle for about half a second.
const Banner = "virtstation-echo ready\r\n"

// Offsets inside the boot sector, which the BIOS loads at 0000:7C00. The code
// below refers to them as absolute addresses (loadAddress+offset);
// TestBootSectorLayout keeps them in step with the bytes.
const (
	loadAddress   = 0x7C00
	irq4Offset    = 0x7C // the serial interrupt handler
	bannerOffset  = 0x83 // the NUL-terminated banner, right after the code
	sectorSize    = 512
	bootSignature = 0xAA55
)

// echoCode is the guest, hand-assembled 16-bit real-mode x86 (GNU as syntax
// in the comments, Intel operand order). It drives COM1 (I/O 0x3F8, 16550
// UART) directly:
//
//   - the UART raises IRQ4 when a byte arrives, so the CPU sleeps in hlt
//     between bytes instead of spinning (a TCG guest that polls would burn a
//     host core for the whole test);
//   - the BIOS timer (IRQ0, 18.2 Hz) also wakes it; the tick counter at
//     0040:006C times the idle banner.
//
// To review a change, write bootSector() to a file and disassemble it with
// `objdump -D -b binary -m i8086 -M intel FILE`; the listing must match the
// comments. TestSerialEcho proves the bytes on a real QEMU.
var echoCode = []byte{
	// start:
	0xFA,       // cli  ; no interrupts until the stack and IVT are set
	0xFC,       // cld  ; lodsb walks forward
	0x31, 0xC0, // xor ax, ax
	0x8E, 0xD8, // mov ds, ax  ; ds = 0: IVT, BIOS data area and our code are all addressable
	0x8E, 0xD0, // mov ss, ax
	0xBC, 0x00, 0x7C, // mov sp, 0x7C00  ; stack grows down below the boot sector
	0xC7, 0x06, 0x30, 0x00, 0x7C, 0x7C, // mov word ptr [0x30], 0x7C7C  ; IVT[0x0C] (IRQ4) offset = irq4
	0xC7, 0x06, 0x32, 0x00, 0x00, 0x00, // mov word ptr [0x32], 0  ; IVT[0x0C] segment = 0
	0xBA, 0xFB, 0x03, // mov dx, 0x3FB  ; LCR
	0xB0, 0x03, // mov al, 0x03  ; 8 data bits, no parity, 1 stop bit, DLAB off
	0xEE,       // out dx, al
	0xB2, 0xFA, // mov dl, 0xFA  ; FCR
	0xB0, 0x07, // mov al, 0x07  ; enable and clear FIFOs, trigger at 1 byte
	0xEE,       // out dx, al
	0xB2, 0xFC, // mov dl, 0xFC  ; MCR
	0xB0, 0x0B, // mov al, 0x0B  ; DTR, RTS, OUT2 (OUT2 gates the IRQ line on real UARTs)
	0xEE,       // out dx, al
	0xB2, 0xF9, // mov dl, 0xF9  ; IER
	0xB0, 0x01, // mov al, 0x01  ; interrupt on received data only
	0xEE,       // out dx, al
	0xE4, 0x21, // in al, 0x21  ; master PIC mask
	0x24, 0xEF, // and al, 0xEF  ; unmask IRQ4
	0xE6, 0x21, // out 0x21, al
	// banner: (0x32)
	0xBE, 0x83, 0x7C, // mov si, 0x7C83  ; si = loadAddress + bannerOffset
	// print: (0x35)
	0xAC,       // lodsb  ; al = [si++]
	0x84, 0xC0, // test al, al
	0x74, 0x05, // jz idle_reset  ; NUL ends the banner
	0xE8, 0x2F, 0x00, // call putc
	0xEB, 0xF6, // jmp print
	// idle_reset: (0x3F)
	0x8B, 0x1E, 0x6C, 0x04, // mov bx, [0x46C]  ; bx = BIOS tick count when the line last spoke
	// wait: (0x43)
	0xFA,             // cli  ; close the race between the LSR check and hlt
	0xBA, 0xFD, 0x03, // mov dx, 0x3FD  ; LSR
	0xEC,       // in al, dx
	0xA8, 0x01, // test al, 0x01  ; data ready?
	0x75, 0x0E, // jnz rx
	0xA1, 0x6C, 0x04, // mov ax, [0x46C]  ; ticks now
	0x29, 0xD8, // sub ax, bx  ; ticks idle
	0x83, 0xF8, 0x09, // cmp ax, 9  ; 9 ticks of 55 ms: about half a second
	0x73, 0xDC, // jae banner
	0xFB,       // sti  ; takes effect after the next instruction,
	0xF4,       // hlt  ; so an IRQ pending since cli wakes this hlt
	0xEB, 0xE9, // jmp wait
	// rx: (0x5A)
	0xB2, 0xF8, // mov dl, 0xF8  ; RBR (dh is still 0x03)
	0xEC,       // in al, dx  ; the received byte
	0x3C, 0x61, // cmp al, 'a'
	0x72, 0x06, // jb echo
	0x3C, 0x7A, // cmp al, 'z'
	0x77, 0x02, // ja echo
	0x2C, 0x20, // sub al, 0x20  ; a-z -> A-Z
	// echo: (0x67)
	0xE8, 0x02, 0x00, // call putc
	0xEB, 0xD3, // jmp idle_reset
	// putc: (0x6C) writes al; clobbers ah, dx
	0x88, 0xC4, // mov ah, al
	0xBA, 0xFD, 0x03, // mov dx, 0x3FD  ; LSR
	// thre: (0x71)
	0xEC,       // in al, dx
	0xA8, 0x20, // test al, 0x20  ; transmit holding register empty?
	0x74, 0xFB, // jz thre
	0xB2, 0xF8, // mov dl, 0xF8  ; THR
	0x88, 0xE0, // mov al, ah
	0xEE, // out dx, al
	0xC3, // ret
	// irq4: (0x7C) acknowledge only; the main loop reads the data
	0x50,       // push ax
	0xB0, 0x20, // mov al, 0x20  ; non-specific EOI
	0xE6, 0x20, // out 0x20, al  ; to the master PIC
	0x58, // pop ax
	0xCF, // iret
}

// bootSector returns the 512-byte boot sector: code, banner, zero padding
// and the 0x55AA signature the BIOS looks for.
func bootSector() []byte {
	b := make([]byte, sectorSize)
	copy(b, echoCode)
	copy(b[bannerOffset:], Banner) // the byte after it stays 0: the terminator
	b[sectorSize-2] = bootSignature & 0xFF
	b[sectorSize-1] = bootSignature >> 8
	return b
}
