// Package qemu starts a real QEMU for tests: the same RFB server and serial
// line KubeVirt's virt-launcher exposes, on unix sockets, with a 512-byte
// guest. Start boots the echo guest, which answers on the serial line;
// StartWith can boot the moving-screen guest instead (MovingScreen, see
// moving.go), which repaints the whole VGA screen 18 times a second for
// tests and benchmarks of the VNC path under motion.
//
// The echo guest is a hand-assembled boot sector (see bootsector.go). Its
// serial output is a stream of two kinds of record, never interleaved:
//
//   - Banner, written at boot and again whenever the line has received
//     nothing for about half a second;
//   - the echo of each received byte, with a-z turned into A-Z.
//
// So a client that connects at any time reads Banner within a second, and a
// client that sends "abc" reads "ABC" (possibly after a Banner). Tests should
// read until they see what they expect rather than expect exact offsets.
//
// Screendump takes a PNG of the display through QEMU's QMP monitor
// (VM.QMPSocket), as libvirt does for KubeVirt's vnc/screenshot.
//
// QEMU's serial chardev serves one client at a time: a second connection
// waits in the listen backlog until the first one closes. Output written
// while nobody is connected is lost, which is why the banner repeats.
package qemu
