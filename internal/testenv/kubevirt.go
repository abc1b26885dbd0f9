package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/internal/kvadmission"
)

// WithDefaultArchitecture makes KubeVirt's admission judge VMs as in a
// cluster whose default architecture is arch (the KubeVirt CR's
// spec.configuration.architectureConfiguration.defaultArchitecture).
func WithDefaultArchitecture(arch string) StartOption {
	return func(o *startOptions) { o.defaultArch = arch }
}

// startKubeVirtAdmission runs KubeVirt v1.9.0's own VirtualMachine
// admission (internal/kvadmission) and registers it with the API server,
// so every VM any test creates passes KubeVirt's validation after
// Virtstation's mutation, as in a real cluster. It also refuses, at apply, a
// VM whose VMI KubeVirt would refuse when it starts: a test learns at once
// what a user would learn only at start.
func (e *Env) startKubeVirtAdmission(ctx context.Context, arch string) error {
	kubeconfig, err := e.AddAdmin("kubevirt-admission")
	if err != nil {
		return err
	}
	kcPath := filepath.Join(e.tmpDir, "kubevirt-admission.kubeconfig")
	if err := os.WriteFile(kcPath, kubeconfig, 0o600); err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(e.tmpDir, "kubevirt-admission.log"))
	if err != nil {
		return err
	}
	wio := &e.env.WebhookInstallOptions
	wh, err := kvadmission.StartWebhook(ctx, kvadmission.WebhookOptions{
		CertDir:     wio.LocalServingCertDir,
		Kubeconfig:  kcPath,
		DefaultArch: arch,
		Log:         logFile,
	})
	if err != nil {
		return fmt.Errorf("start KubeVirt's admission (log in %s): %w", logFile.Name(), err)
	}
	e.KubeVirt = wh
	c, err := client.New(e.Config, client.Options{})
	if err != nil {
		return err
	}
	if err := c.Create(ctx, wh.Configuration(wio.LocalServingCAData)); err != nil {
		return fmt.Errorf("register KubeVirt's admission: %w", err)
	}
	return nil
}
