// Package lifecycle stops idle workstations and records why: the
// workstation lifecycle of docs/lifecycle.md.
//
// A managed VirtualMachine with an idle timeout (its
// virtstation.io/idle-timeout annotation, or its namespace's
// virtstation-lifecycle ConfigMap, or the cluster's in the install
// namespace) that has had no activity for that long gets a notice: the
// annotation virtstation.io/idle-stop-at, which the bridge shows to
// connected browsers as a banner with a "Keep running" button, and an
// Event. Activity during the grace period, or a keep-running lease, takes
// the notice back. When the grace period ends the Controller stops the VM
// through KubeVirt's stop subresource, exactly as virtctl stop does
// (runStrategy Halted; KubeVirt shuts the guest down gracefully and forces
// it only after the VMI's termination grace period), and records the stop
// in virtstation.io/idle-stop and an Event.
//
// Activity is user input through the bridge, recorded in an activity Lease
// per VM in the install namespace (package bridge/activity writes it); users
// logged in to the guest, asked of the guest agent (KubeVirt's userlist)
// before every notice and every stop; and keep-running leases, from the
// browser (on the activity Lease) or kubectl annotate
// (virtstation.io/keep-running-until), capped by max-keep-running.
//
// A stop that would lose data (a writable disk that does not survive a
// stop, a PVC that is not Bound) is never made unless the VM opts in with
// virtstation.io/idle-stop-unsafe=true; it is recorded as skipped. In
// observe mode the Controller records the notice and the stop it would
// have made, as Events and in virtstation.io/idle-stop, and changes
// nothing else: no banner, no stop.
//
// Decide is the state machine, a pure function of an Observation. The
// Controller gathers Observations from its caches, acts on Decisions, and
// schedules the next look with the workqueue's timers (RequeueAfter): it
// never polls, and a VM that is in use costs it no API call.
package lifecycle
