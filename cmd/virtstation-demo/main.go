// Command virtstation-demo runs Virtstation on an embedded local control
// plane: a real kube-apiserver and etcd with the KubeVirt, CDI and
// cert-manager CRDs, the webhooks, KubeVirt's own admission, and the
// bridge with a stand-in virt-api. It applies the manifests of a directory
// and prints what the webhooks made of them; then it starts dev-alice
// (examples/10-workstation.yaml) through KubeVirt's own code and boots its
// stored spec, the Debian guest image with its data disk and cloud-init,
// in QEMU, and shows its login prompt and alice's SSH session through the
// bridge. It keeps running until Ctrl-C:
//
//	virtstation-demo [-f examples/] [-kubeconfig FILE] [-bridge-address ADDR] [-v]
//
// DEMO_GUEST=echo puts a 512-byte guest that echoes the serial line in
// capitals behind dev-alice instead (no image, no boot wait);
// VIRTSTATION_GUEST_IMAGE names the guest image's directory, else
// hack/guest-image.sh builds it once per machine. DEMO_EXIT=1 exits after
// printing.
//
// It is a command of its own, apart from the virtstation CLI, because it
// links the test harnesses (internal/testenv, internal/bridgestack), which
// run only on Linux; `make demo` runs it.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Exit codes.
const (
	exitOK = 0
	// exitFailure: the demo could not start or failed.
	exitFailure = 1
	// exitBadInput: unreadable manifests or bad flags.
	exitBadInput = 2
)

// streams are the command's standard streams.
type streams struct {
	out, err io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := runDemo(ctx, os.Args[1:], streams{out: os.Stdout, err: os.Stderr})
	stop()
	os.Exit(code)
}
