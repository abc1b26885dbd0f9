// Package relay measures the VNC relay paths side by side (issue 8, part 3):
// a project-written RFB source (Source) is read by one client (Client)
// through a plain TCP relay (the ceiling), through websockify (the peer most
// KubeVirt noVNC setups use), and through the bridge's VNC path (relay.Relay
// with a vnc.Proxy) with its adaptive controller off and on. Every proxy
// runs as its own process, so its CPU is read from /proc alone; the source,
// the client and the stand-in for the API server's WebSocket (Upstream) run
// in the benchmark's process. See docs/benchmarks.md.
package relay
