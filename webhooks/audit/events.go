package audit

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtstation/virtstation/policyreport"
)

// Event reasons on a VM.
const (
	// ReasonPolicyViolation: the VM now fails (or warns on) a rule it
	// passed at the previous audit.
	ReasonPolicyViolation = "PolicyViolation"
	// ReasonPolicyPassed: the VM now passes a rule it failed.
	ReasonPolicyPassed = "PolicyPassed"
)

// maxNote is the longest note an Event may carry.
const maxNote = 1024

// recordTransitions records an Event on each VM whose result for a rule
// moved between passing and failing.
func (a *Auditor) recordTransitions(previous, next []policyreport.Result) {
	if a.Recorder == nil {
		return
	}
	for _, t := range policyreport.Transitions(previous, next) {
		vm := t.Result.Subjects[0]
		ref := &metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{APIVersion: vm.APIVersion, Kind: vm.Kind},
			ObjectMeta: metav1.ObjectMeta{Namespace: vm.Namespace, Name: vm.Name, UID: vm.UID},
		}
		mode := t.Result.Properties[policyreport.PropMode]
		if t.Failing {
			note := fmt.Sprintf("policy audit: rule %s now gives %s (mode %s): %s", t.Result.Rule, t.Result.Result, mode, t.Result.Description)
			a.Recorder.Eventf(ref, nil, corev1.EventTypeWarning, ReasonPolicyViolation, "Audit", "%s", cut(note))
			continue
		}
		a.Recorder.Eventf(ref, nil, corev1.EventTypeNormal, ReasonPolicyPassed, "Audit", "%s",
			cut(fmt.Sprintf("policy audit: rule %s passes again", t.Result.Rule)))
	}
}

func cut(note string) string {
	if len(note) <= maxNote {
		return note
	}
	return strings.ToValidUTF8(note[:maxNote-3], "") + "..."
}
