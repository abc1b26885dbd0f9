// Package audit holds issue 18's policy audit benchmark.
//
// BenchmarkPolicyAudit creates managed VirtualMachines through a real
// kube-apiserver (the envtest control plane, with Virtstation's webhooks and
// KubeVirt's own admission), spread over namespaces, some with a labelled
// data disk and about one in ten violating the mount-path rule in dryrun
// mode, then runs its own webhooks/audit.Auditor on the manager's cache and
// measures, side by side in one run:
//
//  1. one full pass: every namespace reconciled once by a fresh Auditor
//     (wall time, bytes allocated, heap after, PolicyReport writes counted
//     by the API server);
//  2. a resync with nothing changed (time; writes must be 0);
//  3. the peer: the validating webhook's handler on an UPDATE of each VM
//     onto itself (DryRun, so no claim is written), summed over the VMs, and
//     Engine.EvaluateRequest alone on the same requests.
//
// See docs/benchmarks.md ("Policy audit (issue 18)") for the command and
// the results.
package audit
