// Package policyreport turns policy decisions on managed VirtualMachines into
// the standard policy reports that Kyverno and Policy Reporter use: one
// namespaced wgpolicyk8s.io/v1alpha2 PolicyReport per namespace (or its
// successor, openreports.io/v1alpha1 Report), holding one result per VM and
// rule.
//
// Everything here is pure: the audit reconciler (package webhooks/audit)
// and `virtstation render --report` build the same reports from the same
// decisions, and do the reading and writing themselves.
//
// The results use openreports' Go types (ReportResult, ReportSummary): their
// JSON is field for field that of wgpolicyk8s.io/v1alpha2, whose own Go
// module the module proxy does not serve.
package policyreport
