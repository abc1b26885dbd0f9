package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubevirtv1 "kubevirt.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/yaml"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/qemu"
	"github.com/virtstation/virtstation/internal/testenv"
	"github.com/virtstation/virtstation/internal/virtlauncher"
	"github.com/virtstation/virtstation/render"
	"github.com/virtstation/virtstation/webhooks/mutate"
)

// demoEventWait bounds the wait for the Injected events the reporter writes
// shortly after each admission.
const demoEventWait = 5 * time.Second

// runDemo runs the demo as args ask and returns its exit code.
func runDemo(ctx context.Context, args []string, s streams) int {
	fl, err := parseDemoFlags(args, s.err)
	if err != nil {
		return exitBadInput
	}
	level := zapcore.ErrorLevel
	if fl.verbose {
		level = zapcore.InfoLevel
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(s.err), zap.Level(level)))

	objs, err := readDir(fl.dir)
	if err != nil {
		return failed(s, exitBadInput, err)
	}
	mode, err := parseGuestMode(os.Getenv(guestEnv))
	if err != nil {
		return failed(s, exitBadInput, err)
	}
	in, err := prepareDemo(fl, objs, mode, s.out)
	if err != nil {
		return failed(s, exitFailure, err)
	}
	return serveDemo(ctx, fl, in, s)
}

// demoFlags are the demo's command line.
type demoFlags struct {
	dir, kubeconfig, bridgeAddr string
	verbose                     bool
}

// parseDemoFlags parses args; errors and -h's usage go to stderr.
func parseDemoFlags(args []string, stderr io.Writer) (demoFlags, error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var fl demoFlags
	fs.StringVar(&fl.dir, "f", "examples", "directory of manifests to apply, in file-name order")
	fs.StringVar(&fl.kubeconfig, "kubeconfig", filepath.Join(os.TempDir(), "virtstation-demo", "kubeconfig"), "where to write a kubeconfig for the demo control plane")
	fs.BoolVar(&fl.verbose, "v", false, "show the webhook server's and the bridge's logs")
	fs.StringVar(&fl.bridgeAddr, "bridge-address", "127.0.0.1:8090", "where the demo's bridge listens")
	return fl, fs.Parse(args)
}

// failed reports err on stderr and returns the exit code.
func failed(s streams, code int, err error) int {
	fmt.Fprintf(s.err, "demo: %v\n", err)
	return code
}

// demoInput is what the demo applies, where it writes the user's files,
// and the guest that plays dev-alice's machine.
type demoInput struct {
	objs  []render.Object
	files demoFiles
	guest guest
}

// prepareDemo prepares the guest and, for the Debian guest, alice's SSH
// key, whose Secret goes before the VMs in objs.
func prepareDemo(fl demoFlags, objs []render.Object, mode guestMode, out io.Writer) (demoInput, error) {
	// Absolute: the user's kubeconfig names the token and CA files.
	userDir, err := filepath.Abs(filepath.Dir(fl.kubeconfig))
	if err != nil {
		return demoInput{}, err
	}
	files := demoFiles{dir: userDir}
	g, err := prepareGuest(mode, out)
	if err != nil {
		return demoInput{}, err
	}
	if mode == debianGuest {
		// Before the VMs: cloudInit propagation writes the namespace's
		// keys into the user-data when the webhook admits dev-alice.
		pub, err := writeDemoKey(files)
		if err != nil {
			return demoInput{}, err
		}
		objs = withBeforeVMs(objs, keySecret(pub))
		fmt.Fprintf(out, "%s's SSH key: %s (private), %s.pub; the public key goes in Secret %s/%s.\n", demoUser, files.sshKey(), files.sshKey(), demoNamespace, demoKeySecret)
	}
	return demoInput{objs: objs, files: files, guest: g}, nil
}

// serveDemo starts the control plane, applies in.objs and shows what the
// webhooks and the audit made of them, serves the bridge, and runs until
// ctx ends (or at once with DEMO_EXIT=1).
func serveDemo(ctx context.Context, fl demoFlags, in demoInput, s streams) int {
	fmt.Fprintln(s.out, "Starting kube-apiserver, etcd and the Virtstation webhook (first run on a machine builds the binaries)...")
	env, err := testenv.Start(ctx)
	if err != nil {
		return failed(s, exitFailure, err)
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintf(s.err, "demo: stop: %v\n", err)
		}
	}()
	if err := writeKubeconfig(env, fl.kubeconfig); err != nil {
		return failed(s, exitFailure, err)
	}
	fmt.Fprintf(s.out, "Control plane up at %s\n\n", env.Config.Host)

	if err := applyAndShow(ctx, env, in.objs, s.out); err != nil {
		return failed(s, exitFailure, err)
	}
	if err := showAudit(ctx, env, s.out); err != nil {
		return failed(s, exitFailure, err)
	}
	stopBridge, err := demoBridge(ctx, env, fl.bridgeAddr, in.files, in.guest, s.out)
	if err != nil {
		return failed(s, exitFailure, fmt.Errorf("bridge: %w", err))
	}
	defer func() {
		if err := stopBridge(); err != nil {
			fmt.Fprintf(s.err, "demo: stop the bridge: %v\n", err)
		}
	}()
	if os.Getenv("DEMO_EXIT") == "1" {
		return exitOK
	}
	showIdleStop(ctx, env, fl.kubeconfig, s.out)
	fmt.Fprintf(s.out, "\nThe control plane keeps running. Try:\n  kubectl --kubeconfig %s get vm -A\nCtrl-C stops it.\n", fl.kubeconfig)
	<-ctx.Done()
	return exitOK
}

// showIdleStop tells how to watch dev-alice's idle stop, with the timeout
// and grace period its stored annotations give (nothing when it has none).
func showIdleStop(ctx context.Context, env *testenv.Env, kubeconfig string, out io.Writer) {
	vm := &kubevirtv1.VirtualMachine{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: demoNamespace, Name: demoVM}, vm); err != nil {
		return
	}
	timeout, grace := vm.Annotations[api.AnnotationIdleTimeout], vm.Annotations[api.AnnotationIdleGracePeriod]
	if timeout == "" {
		return
	}
	if grace == "" {
		grace = api.DefaultIdleGracePeriod.String()
	}
	fmt.Fprintf(out, `
Idle stop: %[2]s stops after %[4]s without input through the bridge, %[5]s
after a notice (an Event, and a banner in an open page); opening its page
again starts it, with a progress page. Watch it:
  kubectl --kubeconfig %[1]s get events -n %[3]s -w
  kubectl --kubeconfig %[1]s get vmi -n %[3]s
`, kubeconfig, demoVM, demoNamespace, timeout, grace)
}

// prepareGuest checks that QEMU is installed and, for the Debian guest,
// finds its image (hack/guest-image.sh builds it once per machine, about 2
// minutes, showing its progress on stderr).
func prepareGuest(mode guestMode, out io.Writer) (guest, error) {
	if _, err := exec.LookPath(qemu.Binary); err != nil {
		return guest{}, fmt.Errorf("dev-alice's machine needs QEMU: %w (make demo installs it; or apt-get install qemu-system-x86)", err)
	}
	g := guest{mode: mode}
	if mode == echoGuest {
		return g, nil
	}
	if os.Getenv(virtlauncher.ImageEnv) == "" {
		fmt.Fprintln(out, "Finding the Debian guest image (hack/guest-image.sh builds it once per machine, about 2 minutes)...")
	}
	img, err := virtlauncher.FindImage()
	if err != nil {
		return guest{}, fmt.Errorf("the guest image: %w (%s=echo runs the demo with the echo guest instead)", err, guestEnv)
	}
	g.image = img
	fmt.Fprintf(out, "Guest image: %s\n", guestImageDir(img))
	return g, nil
}

// readDir reads every *.yaml file in dir, in name order.
func readDir(dir string) ([]render.Object, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no *.yaml files in %s", dir)
	}
	sort.Strings(files)
	var out []render.Object
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		objs, err := render.ReadObjects(fh)
		_ = fh.Close() // read-only
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

func writeKubeconfig(env *testenv.Env, path string) error {
	b, err := env.AddAdmin("demo")
	if err != nil {
		return fmt.Errorf("create demo user: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// applyAndShow creates each object through the API server and prints every
// VirtualMachine as stored, with what the webhook injected.
func applyAndShow(ctx context.Context, env *testenv.Env, objs []render.Object, out io.Writer) error {
	c, warn, err := env.ClientWithWarnings()
	if err != nil {
		return err
	}
	var managed []*kubevirtv1.VirtualMachine
	for _, o := range objs {
		u := &unstructured.Unstructured{Object: o}
		if u.GetKind() != "Namespace" && u.GetNamespace() == "" {
			u.SetNamespace("default")
		}
		if err := c.Create(ctx, u); err != nil {
			fmt.Fprintf(out, "%s %s: rejected: %v\n\n", u.GetKind(), key(u), err)
			continue
		}
		if u.GetKind() != "VirtualMachine" {
			fmt.Fprintf(out, "%s %s created\n", u.GetKind(), key(u))
			continue
		}
		vm := &kubevirtv1.VirtualMachine{}
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(u), vm); err != nil {
			return err
		}
		if err := showVM(out, vm, warn.Take()); err != nil {
			return err
		}
		if vm.Labels[api.LabelManaged] == api.LabelTrue {
			managed = append(managed, vm)
		}
	}
	// Events first: waiting for them gives the reconcilers time to adopt
	// the Secrets the webhook wrote.
	if err := showEvents(ctx, env, managed, out); err != nil {
		return err
	}
	return showSecrets(ctx, env, managed, out)
}

// showSecrets lists the Secrets Virtstation wrote for the managed VMs, with
// their keys and sizes (not their content).
func showSecrets(ctx context.Context, env *testenv.Env, vms []*kubevirtv1.VirtualMachine, out io.Writer) error {
	seen := map[string]bool{}
	var lines []string
	for _, vm := range vms {
		if seen[vm.Namespace] {
			continue
		}
		seen[vm.Namespace] = true
		var list corev1.SecretList
		if err := env.Client.List(ctx, &list, client.InNamespace(vm.Namespace), client.MatchingLabels{api.LabelManagedBy: api.ManagedByValue}); err != nil {
			return err
		}
		for _, s := range list.Items {
			owner := "no owner yet"
			if ref := metav1.GetControllerOf(&s); ref != nil {
				owner = "owned by " + ref.Kind + " " + ref.Name
			}
			var keys []string
			for k, v := range s.Data {
				keys = append(keys, fmt.Sprintf("%s (%d bytes)", k, len(v)))
			}
			sort.Strings(keys)
			lines = append(lines, fmt.Sprintf("  %s/%s  %s  %s", s.Namespace, s.Name, strings.Join(keys, ", "), owner))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nSecrets written by Virtstation:")
	for _, l := range lines {
		fmt.Fprintln(out, l)
	}
	return nil
}

func key(o client.Object) string {
	if o.GetNamespace() == "" {
		return o.GetName()
	}
	return o.GetNamespace() + "/" + o.GetName()
}

func showVM(out io.Writer, vm *kubevirtv1.VirtualMachine, warns []string) error {
	fmt.Fprintf(out, "\nVirtualMachine %s/%s", vm.Namespace, vm.Name)
	if vm.Labels[api.LabelManaged] != api.LabelTrue {
		fmt.Fprintf(out, " (not labelled %s=true: the webhook was not called)\n", api.LabelManaged)
	} else {
		fmt.Fprintf(out, " (labelled %s=true)\n", api.LabelManaged)
	}
	view := map[string]any{}
	if ann := vm.Annotations; len(ann) > 0 {
		view["annotations"] = ann
	}
	if vm.Spec.Template != nil {
		spec := vm.Spec.Template.Spec
		view["devices"] = spec.Domain.Devices
		view["networks"] = spec.Networks
		view["volumes"] = spec.Volumes
		if len(spec.AccessCredentials) > 0 {
			view["accessCredentials"] = spec.AccessCredentials
		}
		if len(spec.Domain.Resources.Limits) > 0 || len(spec.Domain.Resources.Requests) > 0 {
			view["resources"] = spec.Domain.Resources
		}
	}
	b, err := yaml.Marshal(view)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		fmt.Fprintf(out, "  %s\n", line)
	}
	for _, w := range warns {
		fmt.Fprintf(out, "  warning: %s\n", w)
	}
	return nil
}

// showEvents prints the Injected events of the managed VMs, waiting briefly
// for the reporter to write them.
func showEvents(ctx context.Context, env *testenv.Env, vms []*kubevirtv1.VirtualMachine, out io.Writer) error {
	if len(vms) == 0 {
		return nil
	}
	fmt.Fprintln(out, "\nEvents:")
	deadline := time.Now().Add(demoEventWait)
	for _, vm := range vms {
		for {
			var list eventsv1.EventList
			if err := env.Client.List(ctx, &list, client.InNamespace(vm.Namespace)); err != nil {
				return err
			}
			found := false
			for _, e := range list.Items {
				if e.Regarding.Name == vm.Name && e.Reason == mutate.ReasonInjected {
					fmt.Fprintf(out, "  %s/%s  %s  %s\n", vm.Namespace, vm.Name, e.Reason, e.Note)
					found = true
				}
			}
			if found || time.Now().After(deadline) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}
