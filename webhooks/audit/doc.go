// Package audit is the policy audit: on the leader, it evaluates every
// managed VirtualMachine against the active policy set, as the validating
// webhook would judge an UPDATE of the VM onto itself, and publishes the
// results as one policy report per namespace (package policyreport).
//
// A namespace is audited again when one of its managed VMs or labelled data
// disks changes, when the policy set or the enforcement modes change, when
// one of its reports is changed or deleted by someone else, and every
// Interval. Cost grows linearly with the namespace's VMs: a VM whose object,
// disk state, policy set and modes are those of its last evaluation is not
// evaluated again, and a report is written only when its content changes.
// Each evaluation has the admission's deadline; one that runs past it is an
// error result.
//
// Besides the reports it records an Event on a VM when it starts failing a
// rule it passed, or passes one it failed, and keeps Metrics.
package audit
