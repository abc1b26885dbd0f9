// Package proc is what the test rigs that run a real program (QEMU in
// internal/qemu and internal/virtlauncher, nginx in internal/nginx, the
// browser driver in internal/browser) share: Output collects the program's
// output while it runs, and Process notices its exit once and kills it.
package proc
