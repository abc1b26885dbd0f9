package kvadmission

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
)

// VMPath and VMIPath are where the binary's serve mode answers
// VirtualMachine and VirtualMachineInstance admission; StartPath turns a
// stored VirtualMachine into the VirtualMachineInstance KubeVirt would
// store when it starts (see Webhook.StartVM).
const (
	VMPath    = "/validate-kubevirt-vm"
	VMIPath   = "/validate-kubevirt-vmi"
	StartPath = "/start-vm"
)

// WebhookConfigName is the ValidatingWebhookConfiguration Register writes.
const WebhookConfigName = "kubevirt-admission-stand-in"

// Webhook is a running `kvadmission serve`.
type Webhook struct {
	// Addr is the host:port it serves HTTPS on.
	Addr string
	cmd  *exec.Cmd
	done chan error
}

// WebhookOptions configure StartWebhook.
type WebhookOptions struct {
	// CertDir holds tls.crt and tls.key, valid for 127.0.0.1.
	CertDir string
	// Kubeconfig lets KubeVirt look up instancetypes and preferences.
	Kubeconfig string
	// Namespace, with Kubeconfig, is where KubeVirt is installed: the
	// KubeVirt CR there configures KubeVirt's admission, as it does virt-api
	// (its informer sees changes within moments).
	Namespace string
	// DefaultArch is the default architecture when no KubeVirt CR names
	// one ("" is amd64): that of the node virt-api runs on.
	DefaultArch string
	// Log receives the process's log; nil discards it.
	Log io.Writer
}

// StartWebhook runs the binary's serve mode and waits until it listens.
func StartWebhook(ctx context.Context, o WebhookOptions) (*Webhook, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "--cert-dir", o.CertDir, "--listen", "127.0.0.1:0"}
	if o.Kubeconfig != "" {
		args = append(args, "--kubeconfig", o.Kubeconfig)
	}
	if o.Namespace != "" {
		args = append(args, "--kubevirt-namespace", o.Namespace)
	}
	if o.DefaultArch != "" {
		args = append(args, "--default-arch", o.DefaultArch)
	}
	cmd := exec.Command(bin, args...)
	if o.Log != nil {
		cmd.Stderr = o.Log
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	w := &Webhook{cmd: cmd, done: make(chan error, 1)}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "listening on "); ok {
				addr <- a
			}
		}
		w.done <- cmd.Wait()
	}()
	// KubeVirt builds its OpenAPI validators at start: seconds on 2 cores.
	wait := time.NewTimer(2 * time.Minute)
	defer wait.Stop()
	select {
	case w.Addr = <-addr:
		return w, nil
	case err := <-w.done:
		return nil, fmt.Errorf("kvadmission serve exited before listening: %w", err)
	case <-wait.C:
		return nil, errors.Join(errors.New("kvadmission serve did not listen within 2 minutes"), w.Stop())
	case <-ctx.Done():
		return nil, errors.Join(ctx.Err(), w.Stop())
	}
}

// StartVM is what KubeVirt does when the stored vm starts, run in KubeVirt's
// own code: virt-controller applies the instancetype and preference and
// builds the VirtualMachineInstance (SetupVMIFromVM), and virt-api's VMI
// mutations add their defaults. The result is what a cluster would store;
// creating it is the caller's (and passes KubeVirt's VMI admission then).
// caBundle is the serving certificate's CA.
func (w *Webhook) StartVM(ctx context.Context, vm *kubevirtv1.VirtualMachine, caBundle []byte) (*kubevirtv1.VirtualMachineInstance, error) {
	body, err := json.Marshal(vm)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caBundle) {
		return nil, errors.New("kvadmission: no certificate in the CA bundle")
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+w.Addr+StartPath, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("kvadmission: start %s/%s: %w", vm.Namespace, vm.Name, err)
	}
	defer func() { _ = resp.Body.Close() }()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kvadmission: start %s/%s: %s: %s", vm.Namespace, vm.Name, resp.Status, strings.TrimSpace(string(raw)))
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := json.Unmarshal(raw, vmi); err != nil {
		return nil, fmt.Errorf("kvadmission: decode the started VMI: %w", err)
	}
	return vmi, nil
}

// Stop ends the process. A nil Webhook is stopped already.
func (w *Webhook) Stop() error {
	if w == nil || w.cmd.Process == nil {
		return nil
	}
	if err := w.cmd.Process.Signal(os.Interrupt); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	select {
	case err := <-w.done:
		// serve shuts down on an interrupt and exits 0.
		return err
	case <-time.After(10 * time.Second):
		return errors.Join(errors.New("kvadmission serve did not stop within 10s"), w.cmd.Process.Kill())
	}
}

// Configuration is the ValidatingWebhookConfiguration that sends every
// VirtualMachine CREATE and UPDATE, and every VirtualMachineInstance
// CREATE, to w, as virt-api's virtualmachine-validator.kubevirt.io and
// virtualmachineinstances-create-validator.kubevirt.io do in a cluster
// (failurePolicy Fail).
func (w *Webhook) Configuration(caBundle []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	hook := func(name, path, resource string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.ValidatingWebhook {
		url := "https://" + w.Addr + path
		fail := admissionregistrationv1.Fail
		none := admissionregistrationv1.SideEffectClassNone
		timeout := int32(10)
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name,
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: ops,
				Rule: admissionregistrationv1.Rule{
					APIGroups:   []string{"kubevirt.io"},
					APIVersions: []string{"v1"},
					Resources:   []string{resource},
				},
			}},
		}
	}
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: WebhookConfigName},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			hook("virtualmachine-validator.kubevirt.io", VMPath, "virtualmachines", admissionregistrationv1.Create, admissionregistrationv1.Update),
			hook("virtualmachineinstances-create-validator.kubevirt.io", VMIPath, "virtualmachineinstances", admissionregistrationv1.Create),
		},
	}
}
