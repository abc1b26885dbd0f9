package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	v1 "kubevirt.io/api/core/v1"
	"kubevirt.io/client-go/kubecli"

	"kubevirt.io/kubevirt/pkg/controller"

	"kubevirt.io/kubevirt/pkg/testutils"
	virtconfig "kubevirt.io/kubevirt/pkg/virt-config"
)

// kubeVirtCR is the KubeVirt CR the checks read: the file given, or an
// empty configuration (KubeVirt's defaults). defaultArch, when set, is what
// virt-operator would write into status.defaultArchitecture from
// spec.configuration.architectureConfiguration.defaultArchitecture, the
// field virt-api actually reads (pkg/virt-config/configuration.go).
func kubeVirtCR(path, defaultArch string, featureGates []string) (*v1.KubeVirt, error) {
	kv := &v1.KubeVirt{ObjectMeta: metav1.ObjectMeta{Name: "kubevirt", Namespace: "kubevirt"}}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if err := yaml.Unmarshal(b, kv); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	cfg := &kv.Spec.Configuration
	if defaultArch != "" {
		if cfg.ArchitectureConfiguration == nil {
			cfg.ArchitectureConfiguration = &v1.ArchConfiguration{}
		}
		cfg.ArchitectureConfiguration.DefaultArchitecture = defaultArch
	}
	if len(featureGates) > 0 {
		if cfg.DeveloperConfiguration == nil {
			cfg.DeveloperConfiguration = &v1.DeveloperConfiguration{}
		}
		cfg.DeveloperConfiguration.FeatureGates = append(cfg.DeveloperConfiguration.FeatureGates, featureGates...)
	}
	// virt-operator's SetDefaultArchitecture (pkg/virt-operator/util/config.go).
	if a := cfg.ArchitectureConfiguration; a != nil && a.DefaultArchitecture != "" {
		kv.Status.DefaultArchitecture = a.DefaultArchitecture
	} else if kv.Status.DefaultArchitecture == "" {
		kv.Status.DefaultArchitecture = "amd64"
	}
	return kv, nil
}

// clusterConfig is virt-api's view of kv, as virt-api running on a node of
// the cluster's default architecture would build it.
func clusterConfig(kv *v1.KubeVirt) *virtconfig.ClusterConfig {
	cfg, _, _ := testutils.NewFakeClusterConfigUsingKVWithCPUArch(kv, kv.Status.DefaultArchitecture)
	return cfg
}

// liveClusterConfig is virt-api's own cluster configuration: informers on
// the API server's KubeVirt CRs and CRDs, read as pkg/virt-api/api.go does.
// cpuArch is the architecture of the node virt-api would run on, the
// default when no KubeVirt CR names one.
func liveClusterConfig(ctx context.Context, client kubecli.KubevirtClient, namespace, cpuArch string) (*virtconfig.ClusterConfig, error) {
	f := controller.NewKubeInformerFactory(client.RestClient(), client, client, nil, namespace)
	kubeVirtInformer := f.KubeVirt()
	crdInformer := f.CRD()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return virtconfig.NewClusterConfigWithCPUArch(crdInformer, kubeVirtInformer, namespace, cpuArch)
}

// splitList parses a comma-separated flag.
func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
