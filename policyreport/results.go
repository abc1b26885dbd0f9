package policyreport

import (
	"errors"
	"sort"
	"strings"
	"unicode/utf8"

	orv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/policy"
)

// Result is one VM's result for one rule.
type Result = orv1alpha1.ReportResult

// Identity of Virtstation's results.
const (
	// Source is every result's source, as Policy Reporter groups them.
	Source = "virtstation"
	// Category is every result's category.
	Category = "Virtstation"
)

// Result values (the wgpolicyk8s.io enumeration; skip is never given).
const (
	// Pass: the VM satisfies the rule.
	Pass orv1alpha1.Result = "pass"
	// Fail: the rule denies the VM (in deny mode), or would (dryrun mode).
	Fail orv1alpha1.Result = "fail"
	// Warn: the rule warns about the VM, or denies it in warn mode.
	Warn orv1alpha1.Result = "warn"
	// Error: the VM could not be evaluated (its evaluation ran past the
	// admission deadline).
	Error orv1alpha1.Result = "error"
)

// Result properties.
const (
	// PropMode is the rule's enforcement mode: deny, warn or dryrun.
	PropMode = "mode"
	// PropField is the field path of each violation, ", "-joined.
	PropField = "field"
	// PropRevision is the policy set that decided.
	PropRevision = "policyRevision"
)

// Bounds on what one result holds, so a policy with long messages cannot
// push a report past what the API server stores (package doc of report.go).
const (
	maxMessageBytes = 1024
	maxFieldBytes   = 512
)

// VMRef is the reference a result gives to a VirtualMachine.
func VMRef(namespace, name string, uid types.UID) corev1.ObjectReference {
	return corev1.ObjectReference{APIVersion: "kubevirt.io/v1", Kind: "VirtualMachine", Namespace: namespace, Name: name, UID: uid}
}

// VMResults is the VM's result for each rule of rules and each rule a
// violation of d names, sorted by rule: what the validating webhook would
// decide on it under modes. A deny violation fails in deny and dryrun mode
// (dryrun is how a rule is tried on live VMs before it is enforced) and
// warns in warn mode; a warn violation warns. The message is the webhook's,
// one line per violation. Timestamps are left zero (see Stamp).
func VMResults(vm corev1.ObjectReference, rules []string, d policy.Decision, modes policy.Modes) []Result {
	type acc struct {
		result          orv1alpha1.Result
		fields, message []string
	}
	byRule := map[string]*acc{}
	for _, id := range rules {
		byRule[id] = &acc{result: Pass}
	}
	add := func(v policy.Violation, r orv1alpha1.Result) {
		a := byRule[v.ID]
		if a == nil {
			a = &acc{result: Pass}
			byRule[v.ID] = a
		}
		if r == Fail || a.result == Pass {
			a.result = r
		}
		a.fields = append(a.fields, v.Field)
		a.message = append(a.message, strings.TrimSpace(v.Message))
	}
	for _, v := range d.Deny {
		if modes.Mode(v.ID) == policy.ModeWarn {
			add(v, Warn)
		} else {
			add(v, Fail)
		}
	}
	for _, v := range d.Warn {
		add(v, Warn)
	}
	ids := make([]string, 0, len(byRule))
	for id := range byRule {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]Result, 0, len(ids))
	for _, id := range ids {
		a := byRule[id]
		r := newResult(vm, id, a.result, strings.Join(a.message, "\n"), string(modes.Mode(id)), d.Revision)
		if len(a.fields) > 0 {
			r.Properties[PropField] = truncate(strings.Join(a.fields, ", "), maxFieldBytes)
		}
		out = append(out, r)
	}
	return out
}

// ErrorResults is an error result for each rule of rules: the VM's
// evaluation failed with message (such as the admission's deadline
// denial), so nothing is known of any rule.
func ErrorResults(vm corev1.ObjectReference, rules []string, message string, modes policy.Modes, revision string) []Result {
	ids := append([]string(nil), rules...)
	sort.Strings(ids)
	out := make([]Result, 0, len(ids))
	for _, id := range ids {
		out = append(out, newResult(vm, id, Error, message, string(modes.Mode(id)), revision))
	}
	return out
}

// FromEvaluation is the VM's results from one evaluation of its policies:
// those of its decision d when err is nil, else an error result for each
// rule, whose message is the webhook's own denial when err has one
// (policy.Denier: an evaluation that ran past its deadline). revision is the policy set evaluated. The webhook's
// audit and `virtstation render --report` both call it, so they report a
// failed evaluation alike.
func FromEvaluation(vm corev1.ObjectReference, rules []string, d policy.Decision, err error, modes policy.Modes, revision string) []Result {
	var late policy.Denier
	switch {
	case err == nil:
		return VMResults(vm, rules, d, modes)
	case errors.As(err, &late):
		return ErrorResults(vm, rules, late.Denial(), modes, revision)
	default:
		// The webhook answers these with an error too.
		return ErrorResults(vm, rules, "the policies could not be evaluated: "+err.Error(), modes, revision)
	}
}

func newResult(vm corev1.ObjectReference, rule string, result orv1alpha1.Result, message, mode, revision string) Result {
	props := map[string]string{PropMode: mode}
	if revision != "" {
		props[PropRevision] = revision
	}
	return Result{
		Source: Source, Policy: rule, Rule: rule, Category: Category,
		Result: result, Scored: true,
		Subjects:    []corev1.ObjectReference{vm},
		Description: truncate(message, maxMessageBytes),
		Properties:  props,
	}
}

// truncate cuts s to at most n bytes on a rune boundary, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	cut := n - len(mark)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + mark
}

// Failing reports whether a result counts as a violation: fail or warn.
func Failing(r orv1alpha1.Result) bool { return r == Fail || r == Warn }
