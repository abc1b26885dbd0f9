// Package activity records user input through the bridge as the activity
// of a VM, for the workstation lifecycle (docs/lifecycle.md), which stops
// a VM after its idle timeout without activity.
//
// Activity is input, not an open tab: keys and pointer events on VNC,
// bytes typed on the serial console and in SSH (never a resize, a
// framebuffer request or a ping). The relay calls the function For
// returns on every input message; that call is cheap and never blocks.
//
// # The activity Lease
//
// A VM's activity is one coordination.k8s.io/v1 Lease in the bridge's own
// namespace, where tenants cannot write (api.ActivityLeaseName):
//
//	labels:      app.kubernetes.io/managed-by: virtstation-bridge
//	             virtstation.io/role:          vm-activity
//	             virtstation.io/vm:            api.VMHash(ns, vm)
//	annotations: virtstation.io/vm-namespace:  <ns>
//	             virtstation.io/vm-name:       <vm>
//	             virtstation.io/keep-running-until, -by, -at: a keep-running
//	                 lease a user took from the browser (KeepRunning)
//	spec:        renewTime:      the last input (or keep-running lease)
//	             holderIdentity: its source, "bridge vnc input", …
//
// # At most one write a minute a VM, however many replicas
//
// Each Recorder remembers, per VM, when it last handed a write over or saw
// one (the throttle). Input within the interval (api.ActivityInterval) of
// that is dropped at once, in memory. Otherwise a write is queued for a
// few background workers; a full queue drops it (and the next input tries
// again), so a slow API server never slows a session. A worker reads the
// Lease: when its renewTime is within the interval of the input, another
// replica wrote it, and the Recorder only remembers that; otherwise it
// creates the Lease or updates it with the resourceVersion read, and a
// Conflict (or AlreadyExists) means another replica won the race: it is
// skipped, never retried. So all replicas together write about once an
// interval per VM under continuous input.
//
// The throttle forgets a VM once its entry is older than the interval,
// when it no longer throttles anything, and tracks at most
// Options.MaxTracked VMs: input of further VMs is dropped until entries
// expire. The bridge's janitor deletes the Leases of VMs that no longer
// exist (LeaseVM).
//
// The decisions are pure functions (throttle.go, lease.go, request.go);
// recorder.go holds the I/O.
package activity
