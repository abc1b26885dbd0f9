package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"kubevirt.io/client-go/kubecli"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kvadmission:", err)
		os.Exit(1)
	}
}

const usage = `usage:
  kvadmission check [flags] < vms.json
  kvadmission serve [flags]
run "kvadmission check -h" or "kvadmission serve -h" for the flags`

func run(args []string, in io.Reader, out io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	arch := fs.String("default-arch", "", "the cluster's default architecture (amd64, arm64, s390x); overrides the KubeVirt CR's")
	crPath := fs.String("kubevirt-cr", "", "a KubeVirt CR (YAML or JSON) whose spec.configuration virt-api reads")
	gates := fs.String("feature-gates", "", "comma-separated feature gates added to the KubeVirt CR")
	kvNamespace := fs.String("kubevirt-namespace", "", "with --kubeconfig: follow the KubeVirt CR in this namespace of the API server, as virt-api does (its spec.configuration and status.defaultArchitecture); the CRD must be installed")
	kubeconfig := fs.String("kubeconfig", "", "API server for instancetype and preference lookups (without it, VMs naming one are refused with the lookup error)")
	op := fs.String("operation", "CREATE", "check: the admission operation, CREATE or UPDATE")
	addr := fs.String("listen", "127.0.0.1:0", "serve: host:port to listen on")
	certDir := fs.String("cert-dir", "", "serve: directory with tls.crt and tls.key")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	kv, err := kubeVirtCR(*crPath, *arch, splitList(*gates))
	if err != nil {
		return err
	}
	client, err := kubevirtClient(*kubeconfig)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg := clusterConfig(kv)
	if *kvNamespace != "" {
		if *kubeconfig == "" {
			return errors.New("--kubevirt-namespace needs --kubeconfig")
		}
		if cfg, err = liveClusterConfig(ctx, client, *kvNamespace, kv.Status.DefaultArchitecture); err != nil {
			return err
		}
	}
	p := newPipeline(cfg, client)
	switch args[0] {
	case "check":
		return check(ctx, p, admissionv1.Operation(*op), in, out)
	case "serve":
		return serve(ctx, p, *addr, *certDir, out)
	default:
		return fmt.Errorf("unknown mode %q\n%s", args[0], usage)
	}
}

// kubevirtClient reaches the kubeconfig's API server, or nowhere: a VM that
// names an instancetype then gets the lookup error as its cause.
func kubevirtClient(path string) (kubecli.KubevirtClient, error) {
	cfg := &rest.Config{Host: "https://127.0.0.1:1"}
	if path != "" {
		var err error
		if cfg, err = clientcmd.BuildConfigFromFlags("", path); err != nil {
			return nil, err
		}
	}
	return kubecli.GetKubevirtClientFromRESTConfig(cfg)
}

// check reads VirtualMachines as a JSON stream and writes one verdict line
// per VM, in order.
func check(ctx context.Context, p *pipeline, op admissionv1.Operation, in io.Reader, out io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(in))
	w := bufio.NewWriter(out)
	enc := json.NewEncoder(w)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); errors.Is(err, io.EOF) {
			return w.Flush()
		} else if err != nil {
			return fmt.Errorf("read VirtualMachine: %w", err)
		}
		v, err := p.checkVM(ctx, raw, op)
		if err != nil {
			v = Verdict{Causes: []Cause{{Message: err.Error()}}, Stage: StageVM}
		}
		if err := enc.Encode(v); err != nil {
			return err
		}
		// One verdict per line, flushed, so a caller can stream VMs.
		if err := w.Flush(); err != nil {
			return err
		}
	}
}
