package validate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/virtstation/virtstation/policy"
)

// Queried documents. The aggregator policies/virtstation.rego defines both.
const (
	denyRef = "data.virtstation.deny"
	warnRef = "data.virtstation.warn"
	query   = "deny := " + denyRef + "; warn := " + warnRef
)

// evaluate runs the set's prepared query on the part of input it reads.
// An evaluation cut off at timeout (and not by ctx) is a *DeadlineError.
func (set *policySet) evaluate(ctx context.Context, timeout time.Duration, input map[string]any) (policy.Decision, error) {
	value, err := ast.InterfaceToValue(set.reads.prune(input))
	if err != nil {
		return policy.Decision{}, fmt.Errorf("convert policy input: %w", err)
	}
	ectx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// No metrics: nothing reads them, and recording them costs time.
	rs, err := set.query.Eval(ectx, rego.EvalParsedInput(value), rego.EvalMetrics(metrics.NoOp()))
	if err != nil {
		if errors.Is(ectx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
			return policy.Decision{}, set.deadlineError(ctx, value, timeout, ectx.Err())
		}
		if ectx.Err() != nil {
			return policy.Decision{}, fmt.Errorf("evaluate policies %s: %w (%w)", set.revision, ectx.Err(), err)
		}
		return policy.Decision{}, fmt.Errorf("evaluate policies %s: %w", set.revision, err)
	}
	if len(rs) != 1 {
		return policy.Decision{}, fmt.Errorf("evaluate policies %s: %s or %s is undefined", set.revision, denyRef, warnRef)
	}
	d := policy.Decision{Revision: set.revision}
	if d.Deny, err = violations(rs[0].Bindings["deny"]); err != nil {
		return policy.Decision{}, fmt.Errorf("policies %s: %s: %w", set.revision, denyRef, err)
	}
	if d.Warn, err = violations(rs[0].Bindings["warn"]); err != nil {
		return policy.Decision{}, fmt.Errorf("policies %s: %s: %w", set.revision, warnRef, err)
	}
	return d, nil
}

// violations reads a deny or warn set. A plain string element becomes the
// message of a violation with ID "policy"; objects may leave out fields.
func violations(v any) ([]policy.Violation, error) {
	elems, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("is a %T, want a set of {id, field, message}", v)
	}
	out := make([]policy.Violation, 0, len(elems))
	for _, el := range elems {
		switch el := el.(type) {
		case string:
			out = append(out, policy.Violation{ID: policy.RuleUnnamed, Message: el})
		case map[string]any:
			vi := policy.Violation{ID: stringOf(el["id"]), Field: stringOf(el["field"]), Message: stringOf(el["message"])}
			if vi.ID == "" {
				vi.ID = policy.RuleUnnamed
			}
			out = append(out, vi)
		default:
			out = append(out, policy.Violation{ID: policy.RuleUnnamed, Message: stringOf(el)})
		}
	}
	policy.SortViolations(out)
	return out, nil
}

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
