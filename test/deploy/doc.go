// Package deploy checks what a platform team installs: the Helm chart in
// charts/virtstation and the kustomize tree in config/.
//
// Its tests run `helm lint` and `helm template` with the Helm CLI built from
// the Go module proxy (hack/build-helm.sh, into bin/helm, when missing),
// render config/default with kustomize's krusty, check the chart's
// structure (replicas, disruption budgets, probes, security contexts,
// webhook selectors, the cert-manager chain), check that the chart and
// config/ grant the same RBAC and install the same objects, and
// server-side dry-run apply every rendered object, with strict field
// validation, against an envtest kube-apiserver that has the KubeVirt, CDI
// and cert-manager CRDs installed.
//
// They also hold the install story together: the images `make images`
// names are the ones the chart and config/ pull; the chart's kubeVersion is
// what its rendered objects need; per-component values render where they
// should; every command of docs/install.md, docs/upgrade.md, docs/gitops.md
// (and README's install section) runs against a real API server; and
// server-side applying the chart twice changes nothing (GitOps).
package deploy
