// Package lifecycle measures the workstation lifecycle controller at scale
// (issue 29): BenchmarkLifecycleScale stores N managed, running VMs with an
// idle timeout (10,000 by default, LIFECYCLE_BENCH_VMS) in a real API
// server, runs the controller against it, and reports
//
//   - the heap the controller adds, per VM, beside its peer: the same
//     manager's informer caches alone (which the webhooks hold anyway);
//   - its API writes while every VM is in use (its steady state: none);
//   - its API writes per idle stop, measured on a batch of VMs that go
//     idle, are given notice and are stopped through KubeVirt's stop
//     subresource (the stand-in virt-api behind the aggregation layer), and
//     from it the writes per hour of N VMs that each go idle once an hour.
//
// See docs/benchmarks.md.
package lifecycle
