package validate

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
)

// Queried documents. The aggregator policies/virtstation.rego defines both.
const (
	denyRef = "data.virtstation.deny"
	warnRef = "data.virtstation.warn"
	query   = "deny := " + denyRef + "; warn := " + warnRef
)

// Violation is one element of the deny or warn set.
type Violation struct {
	// ID is the rule id, such as mount-path; enforcement modes key on it.
	ID string `json:"id"`
	// Field is the path of the offending field, such as
	// metadata.annotations[virtstation.io/data-disks][1].mountPath.
	Field string `json:"field"`
	// Message says what is wrong, then "(rule: <id>; fix: <how>)".
	Message string `json:"message"`
}

// Decision is the outcome of one evaluation, before enforcement modes.
type Decision struct {
	// Deny and Warn are sorted by ID, Field, then Message.
	Deny, Warn []Violation
	// Revision is the policy set that decided.
	Revision string
}

// evaluate runs the set's prepared query on the part of input it reads.
// An evaluation cut off at timeout (and not by ctx) is a *DeadlineError.
func (set *policySet) evaluate(ctx context.Context, timeout time.Duration, input map[string]any) (Decision, error) {
	value, err := ast.InterfaceToValue(set.reads.prune(input))
	if err != nil {
		return Decision{}, fmt.Errorf("convert policy input: %w", err)
	}
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// No metrics: nothing reads them, and recording them costs time.
	rs, err := set.query.Eval(ectx, rego.EvalParsedInput(value), rego.EvalMetrics(metrics.NoOp()))
	if err != nil {
		if errors.Is(ectx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return Decision{}, set.deadlineError(ctx, value, timeout, ectx.Err())
		}
		if ectx.Err() != nil {
			return Decision{}, fmt.Errorf("evaluate policies %s: %w (%w)", set.revision, ectx.Err(), err)
		}
		return Decision{}, fmt.Errorf("evaluate policies %s: %w", set.revision, err)
	}
	if len(rs) != 1 {
		return Decision{}, fmt.Errorf("evaluate policies %s: %s or %s is undefined", set.revision, denyRef, warnRef)
	}
	d := Decision{Revision: set.revision}
	if d.Deny, err = violations(rs[0].Bindings["deny"]); err != nil {
		return Decision{}, fmt.Errorf("policies %s: %s: %w", set.revision, denyRef, err)
	}
	if d.Warn, err = violations(rs[0].Bindings["warn"]); err != nil {
		return Decision{}, fmt.Errorf("policies %s: %s: %w", set.revision, warnRef, err)
	}
	return d, nil
}

// violations reads a deny or warn set. A plain string element becomes the
// message of a violation with ID "policy"; objects may leave out fields.
func violations(v any) ([]Violation, error) {
	elems, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("is a %T, want a set of {id, field, message}", v)
	}
	out := make([]Violation, 0, len(elems))
	for _, el := range elems {
		switch el := el.(type) {
		case string:
			out = append(out, Violation{ID: unnamedRule, Message: el})
		case map[string]any:
			vi := Violation{ID: stringOf(el["id"]), Field: stringOf(el["field"]), Message: stringOf(el["message"])}
			if vi.ID == "" {
				vi.ID = unnamedRule
			}
			out = append(out, vi)
		default:
			out = append(out, Violation{ID: unnamedRule, Message: stringOf(el)})
		}
	}
	sortViolations(out)
	return out, nil
}

// unnamedRule is the ID of violations whose rule gave none.
const unnamedRule = "policy"

func stringOf(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	default:
		return fmt.Sprint(v)
	}
}

func sortViolations(vs []Violation) {
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
