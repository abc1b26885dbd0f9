// Package idle measures what an idle VNC session costs (issue 8, part 4).
//
// BenchmarkIdleSessions opens many VNC sessions through the real bridge
// (the cmd/bridge binary, built by the benchmark and run as its own
// process, so its RSS is its alone) on an envtest control plane whose
// aggregation layer routes subresources.kubevirt.io to the stand-in virt-api
// (internal/virthandler). Every VMI's display leads to a silent source: a unix
// socket that accepts and never sends, so the sessions stay idle. It reads
// the bridge's RSS and PSS from /proc and its Go heap, stacks and goroutines
// from its /metrics, before and after, and checks that closing every
// session brings the goroutines back to their baseline.
//
// Beside it, the peer: Debian's websockify in its default mode, which forks
// a process per connection, holding idle WebSocket sessions to a silent TCP
// source; its RSS, PSS and process count are summed over the listener and
// its children.
//
// The API server holds a Priority and Fairness seat for every connection it
// proxies to an aggregated API, for the connection's life; the benchmark
// routes the bridge's console and VNC dials to the exempt priority level
// with a FlowSchema (exemptSessions), as a cluster running the bridge at
// this scale has to.
//
// TestIdleSessions runs the same at a tiny size, so the benchmark cannot
// rot; it asserts correctness (every session open, goroutines back to the
// baseline), never memory. See docs/benchmarks.md.
package idle
