package policyreport

import (
	"maps"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// resultKey identifies a result across audits: the VM (by UID, so a VM
// deleted and created again under its name starts afresh) and the rule.
type resultKey struct {
	namespace, name, uid, rule string
}

func keyOf(r Result) resultKey {
	k := resultKey{rule: r.Rule}
	if len(r.Subjects) > 0 {
		s := r.Subjects[0]
		k.namespace, k.name, k.uid = s.Namespace, s.Name, string(s.UID)
	}
	return k
}

// Stamp sets each result's timestamp to that of the equal result in
// previous (same VM, rule, value, message and properties), or else to now:
// a result's timestamp is when it last changed, so an audit that finds
// nothing new builds the very report it wrote before and writes nothing.
func Stamp(results, previous []Result, now time.Time) {
	prev := make(map[resultKey]Result, len(previous))
	for _, r := range previous {
		prev[keyOf(r)] = r
	}
	ts := metav1.Timestamp{Seconds: now.Unix()}
	for i := range results {
		if p, ok := prev[keyOf(results[i])]; ok && sameOutcome(p, results[i]) {
			results[i].Timestamp = p.Timestamp
			continue
		}
		results[i].Timestamp = ts
	}
}

// sameOutcome compares what a result says, not when it was found.
func sameOutcome(a, b Result) bool {
	return a.Result == b.Result && a.Description == b.Description && a.Policy == b.Policy &&
		a.Source == b.Source && a.Category == b.Category && a.Severity == b.Severity && a.Scored == b.Scored &&
		maps.Equal(a.Properties, b.Properties)
}

// Transition is a VM's result for a rule moving between passing and
// failing (fail or warn) from one audit to the next.
type Transition struct {
	// Result is the new result.
	Result Result
	// Failing: the VM now fails (or warns on) a rule it passed; false: it
	// passes a rule it failed.
	Failing bool
}

// Transitions lists the results of next that fail (or warn) where
// previous passed, or pass where previous failed, for the same VM and rule.
// A rule new to a VM that previous knew counts as passed before (a stricter
// policy the VM now breaks is news to its owner); a VM new to next has no
// transitions.
func Transitions(previous, next []Result) []Transition {
	prev := make(map[resultKey]Result, len(previous))
	known := map[resultKey]bool{}
	for _, r := range previous {
		k := keyOf(r)
		prev[k] = r
		k.rule = ""
		known[k] = true
	}
	var out []Transition
	for _, r := range next {
		k := keyOf(r)
		was, ok := prev[k].Result, true
		if _, seen := prev[k]; !seen {
			vm := k
			vm.rule = ""
			was, ok = Pass, known[vm]
		}
		if !ok {
			continue
		}
		switch {
		case was == Pass && Failing(r.Result):
			out = append(out, Transition{Result: r, Failing: true})
		case Failing(was) && r.Result == Pass:
			out = append(out, Transition{Result: r, Failing: false})
		}
	}
	return out
}
