// Package guest proves, end to end, that a real Linux guest boots what
// Virtstation wrote. A labelled VirtualMachine goes through the real API
// server, Virtstation's webhooks and KubeVirt's own admission; KubeVirt's
// own code turns the stored VM into its VMI (testenv.StartVM); the
// virt-launcher stand-in (internal/virtlauncher) boots that VMI in QEMU
// with the Debian guest hack/guest-image.sh builds; and the guest is
// reached as a user reaches it: SSH, the serial console and the display
// through the bridge, the display in Chromium.
//
// The guest boots under TCG, one to two minutes on a 2-core machine. The
// package boots twice: one workstation, before and after its user
// switches its keys from cloud-init to the guest agent.
package guest
