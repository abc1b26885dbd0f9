package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	kvcorev1 "kubevirt.io/client-go/kubevirt/typed/core/v1"
)

// defaultConsoleTimeout is virtctl console's default --timeout (5 minutes).
const defaultConsoleTimeout = 5 * time.Minute

// consoleCommand is `virtctl console NAME --timeout D`, with D a duration
// instead of virtctl's minutes.
func consoleCommand() *command {
	var timeout time.Duration
	return &command{
		needsName: true,
		flags: func(fs *flag.FlagSet) {
			fs.DurationVar(&timeout, "timeout", defaultConsoleTimeout, "how long to wait for the VMI to be ready")
		},
		run: func(ctx context.Context, p *peer, name string) error {
			con, err := p.client.VirtualMachineInstance(p.namespace).SerialConsole(name,
				&kvcorev1.SerialConsoleOptions{ConnectionTimeout: timeout})
			if err != nil {
				return fmt.Errorf("%w%s", err, httpStatus(err))
			}
			fmt.Fprintf(p.stderr, "Successfully connected to %s console.\n", name)
			return stream(ctx, con, p.stdin, p.stdout)
		},
	}
}

// httpStatus names the HTTP status of a refused WebSocket upgrade, which
// kubecli keeps in its error but does not print when the server sent a
// Status body; virtctl prints only the message.
func httpStatus(err error) string {
	var async *kvcorev1.AsyncSubresourceError
	if errors.As(err, &async) && async.GetStatusCode() != 0 {
		return fmt.Sprintf(" (HTTP %d)", async.GetStatusCode())
	}
	return ""
}

// stream copies in to the stream and the stream to out until either ends
// or ctx is done.
func stream(ctx context.Context, s kvcorev1.StreamInterface, in io.Reader, out io.Writer) error {
	errc := make(chan error, 1)
	go func() { errc <- s.Stream(kvcorev1.StreamOptions{In: in, Out: out}) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		return nil
	}
}

// vncCommand is `virtctl vnc --proxy-only NAME [--preserve-session]`.
func vncCommand() *command {
	var preserveSession bool
	return &command{
		needsName: true,
		flags: func(fs *flag.FlagSet) {
			fs.BoolVar(&preserveSession, "preserve-session", false, "keep an existing VNC session instead of dropping it")
		},
		run: func(ctx context.Context, p *peer, name string) error {
			vnc, err := p.client.VirtualMachineInstance(p.namespace).VNC(name, preserveSession)
			if err != nil {
				return fmt.Errorf("can't access VMI %s: %w%s", name, err, httpStatus(err))
			}
			ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
			if err != nil {
				return fmt.Errorf("listen: %w", err)
			}
			defer func() { _ = ln.Close() }()
			port, err := json.Marshal(struct {
				Port int `json:"port"`
			}{ln.Addr().(*net.TCPAddr).Port})
			if err != nil {
				return err
			}
			fmt.Fprintln(p.stdout, string(port))
			return proxyOne(ctx, p, name, vnc, ln)
		},
	}
}

// proxyOne pipes the first client ln accepts to the display, as virtctl's
// proxy does: the stream starts at once, the client is piped when it comes,
// and whichever copy ends first ends the command.
func proxyOne(ctx context.Context, p *peer, name string, vnc kvcorev1.StreamInterface, ln net.Listener) error {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	defer func() { _ = inW.Close(); _ = outW.Close() }()
	errc := make(chan error, 3)
	go func() { errc <- vnc.Stream(kvcorev1.StreamOptions{In: inR, Out: outW}) }()
	go func() {
		fd, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		// The connection ends with the process.
		warnIfPaused(ctx, p, name)
		go func() { _, err := io.Copy(fd, outR); errc <- err }()
		go func() { _, err := io.Copy(inW, fd); errc <- err }()
	}()
	select {
	case err := <-errc:
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("error encountered: %w", err)
		}
		return nil
	case <-ctx.Done():
		return nil
	}
}

// warnIfPaused is virtctl's templates.PrintWarningForPausedVMI: it reads the
// VMI and warns when it has the Paused condition. virtctl ignores a failed
// read silently; this says so on stderr, so a test can tell.
func warnIfPaused(ctx context.Context, p *peer, name string) {
	vmi, err := p.client.VirtualMachineInstance(p.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		fmt.Fprintf(p.stderr, "kubecli-peer: reading VMI %s for the paused-VM warning: %v\n", name, err)
		return
	}
	for _, c := range vmi.Status.Conditions {
		if c.Type == kubevirtv1.VirtualMachineInstancePaused {
			fmt.Fprintf(p.stderr, "\rWarning: %s is paused. Console will be active after unpause.\n", name)
			return
		}
	}
}

// screenshotCommand is `virtctl vnc screenshot NAME --file F [--move-cursor]`.
func screenshotCommand() *command {
	var file string
	var moveCursor bool
	return &command{
		needsName: true,
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&file, "file", "", `where to store the PNG; "-" for stdout`)
			fs.BoolVar(&moveCursor, "move-cursor", false, "move the cursor to wake up the screen")
		},
		run: func(ctx context.Context, p *peer, name string) error {
			if file == "" {
				return fmt.Errorf("%w: screenshot needs --file", errUsage)
			}
			png, err := p.client.VirtualMachineInstance(p.namespace).Screenshot(ctx, name,
				&kubevirtv1.ScreenshotOptions{MoveCursor: moveCursor})
			if err != nil {
				return fmt.Errorf("can't access VMI %s: %w", name, err)
			}
			if file == "-" {
				_, err = p.stdout.Write(png)
			} else {
				err = os.WriteFile(file, png, 0o644)
			}
			if err != nil {
				return fmt.Errorf("write the screenshot: %w", err)
			}
			return nil
		},
	}
}

// printPhase reads the VMI and prints its phase.
func printPhase(ctx context.Context, p *peer, name string) error {
	vmi, err := p.client.VirtualMachineInstance(p.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get VMI %s: %w", name, err)
	}
	fmt.Fprintln(p.stdout, vmi.Status.Phase)
	return nil
}

// printVersion asks the server for KubeVirt's version and prints it.
func printVersion(_ context.Context, p *peer, _ string) error {
	info, err := p.client.ServerVersion().Get()
	if err != nil {
		return fmt.Errorf("server version: %w", err)
	}
	b, err := json.Marshal(info)
	if err != nil {
		return err
	}
	fmt.Fprintln(p.stdout, string(b))
	return nil
}
