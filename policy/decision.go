package policy

import "sort"

// Violation is one rule's objection to an object: one element of a
// policy's deny or warn set, or a verdict of a Go check that takes a mode.
type Violation struct {
	// ID is the rule id, such as mount-path; enforcement modes key on it.
	ID string `json:"id"`
	// Field is the path of the offending field, such as
	// metadata.annotations[virtstation.io/data-disks][1].mountPath.
	Field string `json:"field"`
	// Message says what is wrong, then "(rule: <id>; fix: <how>)" (Explain).
	Message string `json:"message"`
}

// Decision is the outcome of one evaluation, before enforcement modes.
type Decision struct {
	// Deny and Warn are sorted by ID, Field, then Message.
	Deny, Warn []Violation
	// Revision is the policy set that decided.
	Revision string
}

// SortViolations sorts vs by ID, Field, then Message: the order of a
// Decision's lists.
func SortViolations(vs []Violation) {
	sort.Slice(vs, func(i, j int) bool {
		a, b := vs[i], vs[j]
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		if a.Field != b.Field {
			return a.Field < b.Field
		}
		return a.Message < b.Message
	})
}

// Denier is an evaluation error that has an admission denial of its own,
// such as an evaluation cut off at its deadline (the validating webhook's
// DeadlineError): the webhook answers it with Denial, and the audit
// reports the same message.
type Denier interface {
	error
	// Denial is the admission message, which ends "(rule: <id>; fix:
	// <how>)".
	Denial() string
}
