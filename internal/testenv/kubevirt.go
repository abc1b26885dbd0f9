package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubevirtv1 "kubevirt.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/internal/kvadmission"
	"github.com/virtstation/virtstation/webhooks"
)

// WithDefaultArchitecture makes KubeVirt's admission judge VMs as in a
// cluster whose default architecture is arch (the KubeVirt CR's
// spec.configuration.architectureConfiguration.defaultArchitecture).
func WithDefaultArchitecture(arch string) StartOption {
	return func(o *startOptions) { o.defaultArch = arch }
}

// KubeVirtCRName is the KubeVirt CR Start creates in KubeVirtNamespace.
const KubeVirtCRName = "kubevirt"

// createKubeVirtCR writes the KubeVirt CR of a deployed KubeVirt: an
// empty configuration (KubeVirt's defaults; no feature gate Virtstation's
// output needs) and the status virt-operator writes, with the default
// architecture virt-api reads. Tests change it to try another cluster
// configuration: KubeVirt's admission and Virtstation's webhook both follow
// it. (virt-api keeps its last configuration when the CR is deleted, so
// tests update it rather than delete it.)
func createKubeVirtCR(ctx context.Context, c client.Client, arch string) error {
	if arch == "" {
		arch = api.DefaultArch
	}
	kv := &kubevirtv1.KubeVirt{
		ObjectMeta: metav1.ObjectMeta{Namespace: KubeVirtNamespace, Name: KubeVirtCRName},
		Status:     kubevirtv1.KubeVirtStatus{Phase: kubevirtv1.KubeVirtPhaseDeployed, DefaultArchitecture: arch},
	}
	if err := c.Create(ctx, kv); err != nil {
		return fmt.Errorf("create the KubeVirt CR: %w", err)
	}
	return nil
}

// startKubeVirtAdmission runs KubeVirt v1.9.0's own VirtualMachine
// admission (internal/kvadmission) and registers it with the API server,
// so every VM any test creates passes KubeVirt's validation after
// Virtstation's mutation, as in a real cluster. It follows the KubeVirt CR
// a test creates in KubeVirtNamespace (its configuration and
// status.defaultArchitecture), as virt-api does. It also refuses, at apply, a
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
		Namespace:   KubeVirtNamespace,
		DefaultArch: arch,
		Log:         logFile,
	})
	if err != nil {
		return fmt.Errorf("start KubeVirt's admission (log in %s): %w", logFile.Name(), err)
	}
	e.KubeVirt = wh
	c, err := client.New(e.Config, client.Options{Scheme: webhooks.NewScheme()})
	if err != nil {
		return err
	}
	if err := createKubeVirtCR(ctx, c, arch); err != nil {
		return err
	}
	if err := c.Create(ctx, wh.Configuration(wio.LocalServingCAData)); err != nil {
		return fmt.Errorf("register KubeVirt's admission: %w", err)
	}
	return nil
}
