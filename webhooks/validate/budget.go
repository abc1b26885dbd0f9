package validate

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/policy"
)

// PolicyBudget is how long one evaluation of the whole policy set on one
// sample input (see Samples) may take when a policy ConfigMap is applied.
// The shipped set takes well under a millisecond on each, so the budget
// leaves an operator policy two orders of magnitude; and it is a tenth of
// the run-time deadline (1 s, see webhooks.policyEvalTimeout), so a policy
// that passes has room for inputs larger than the samples and for a busy
// node before admissions are cut off.
const PolicyBudget = 100 * time.Millisecond

// budgetAttempts is how often a sample is evaluated before running over the
// budget rejects the policy: a busy node can stall one evaluation, a slow
// policy is slow every time.
const budgetAttempts = 2

// attributionTimeout bounds the profiled re-evaluation that finds the module
// an evaluation cut off at its deadline spent its time in. Profiling a fifth
// of a second shows where the time goes; the VM webhook's 5 s timeout has to
// cover the evaluation deadline, this, and writing claims.
const attributionTimeout = 200 * time.Millisecond

// DeadlineError is a policy evaluation cut off at its deadline. Module
// names where the evaluation spent its time, found by evaluating once more
// with a profiler.
type DeadlineError struct {
	// Revision is the policy set evaluated.
	Revision string
	// Deadline is the time the evaluation was given.
	Deadline time.Duration
	// Module is the module (file) the evaluation spent most of its time in,
	// such as slow.rego; empty when no module could be singled out.
	Module string
	// Line is the line in Module that most of that time went to; 0 when
	// unknown.
	Line int
	// ConfigMap is the policy ConfigMap Module came from; zero for a shipped
	// module.
	ConfigMap types.NamespacedName
	err       error
}

var _ policy.Denier = (*DeadlineError)(nil)

func (e *DeadlineError) Error() string {
	return fmt.Sprintf("evaluate policies %s: not done within %s%s: %v", e.Revision, e.Deadline, e.where(), e.err)
}

// Unwrap returns the context's error (context.DeadlineExceeded).
func (e *DeadlineError) Unwrap() error { return e.err }

// where is ", most of it in module m.rego (line 3, ConfigMap ns/name)", or
// empty when no module was singled out.
func (e *DeadlineError) where() string {
	if e.Module == "" {
		return ""
	}
	var detail []string
	if e.Line > 0 {
		detail = append(detail, fmt.Sprintf("line %d", e.Line))
	}
	if e.ConfigMap.Name != "" {
		detail = append(detail, "ConfigMap "+e.ConfigMap.String())
	} else {
		detail = append(detail, "shipped")
	}
	return fmt.Sprintf(", most of it in module %s (%s)", e.Module, strings.Join(detail, ", "))
}

// Denial is the admission message for a VM whose evaluation ran past its
// deadline: it names the module, the deadline and the fix.
func (e *DeadlineError) Denial() string {
	who := "the policy set " + e.Revision
	if e.Module != "" {
		who = "policy module " + e.Module
		if e.ConfigMap.Name != "" {
			who += " (ConfigMap " + e.ConfigMap.String() + ")"
		}
	}
	line := ""
	if e.Line > 0 {
		line = fmt.Sprintf(", most of the time at line %d", e.Line)
	}
	return policy.Explain(
		fmt.Sprintf("virtstation denies this VM: its policy evaluation did not finish within the %s deadline; %s is responsible%s", e.Deadline, who, line),
		policy.RulePolicyDeadline,
		fmt.Sprintf("a cluster operator must make %s faster or remove it; until then every such VM is denied, failing closed", orDefault(e.Module, "the slow operator module")))
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// BudgetError is a policy set whose evaluation on a sample input ran over
// the budget (see CheckBudget).
type BudgetError struct {
	// Sample is the sample input's name; Description what it is.
	Sample, Description string
	// Budget is the time one evaluation was allowed.
	Budget time.Duration
	// Module and Line are where the evaluation spent most of its time;
	// empty and 0 when no module could be singled out.
	Module string
	Line   int
}

func (e *BudgetError) Error() string {
	where := ""
	if e.Module != "" {
		where = ", most of it in " + e.Module
		if e.Line > 0 {
			where += fmt.Sprintf(" at line %d", e.Line)
		}
	}
	return fmt.Sprintf("evaluating the policies on sample input %s (%s) took longer than the %s budget%s", e.Sample, e.Description, e.Budget, where)
}

// CheckBudget compiles the modules and evaluates the set on each sample
// input, each within budget (retried once) and within PolicyMemoryBudget
// of heap allocation. A sample that runs over the time is a *BudgetError
// naming the module the time went to, one that allocates too much a
// *MemoryBudgetError naming the module it was in; a policy set that does
// not compile, or fails to evaluate on a sample, is a *PolicyError. Tests
// are not run (see RunTests and RunTestsWithin).
func CheckBudget(ctx context.Context, modules []Module, budget time.Duration) error {
	compiler, err := Compile(modules)
	if err != nil {
		return err
	}
	return checkBudget(ctx, compiler, modules, Samples(), budget)
}

// checkBudget is CheckBudget on a compiled set.
func checkBudget(ctx context.Context, compiler *ast.Compiler, modules []Module, samples []Sample, budget time.Duration) error {
	return checkBudgets(ctx, compiler, modules, samples, budget, PolicyMemoryBudget)
}

// checkBudgets is checkBudget with a memory budget of memory bytes of heap
// allocation per evaluation: every evaluation is metered (startAllocMeter),
// so one that is stopped by the time budget is also stopped once it has
// allocated that much.
func checkBudgets(ctx context.Context, compiler *ast.Compiler, modules []Module, samples []Sample, budget time.Duration, memory uint64) error {
	set, err := newPolicySet(ctx, compiler, modules)
	if err != nil {
		return err
	}
	for _, s := range samples {
		var (
			derr    *DeadlineError
			used    uint64
			elapsed time.Duration
		)
		for attempt := 0; attempt < max(budgetAttempts, memoryAttempts); attempt++ {
			mctx, meter := startAllocMeter(ctx, memory)
			start := time.Now()
			_, err = set.evaluate(mctx, budget, s.Input)
			elapsed = time.Since(start)
			meter.stop()
			derr, used = nil, meter.tripped()
			if used == 0 && !errors.As(err, &derr) {
				break
			}
		}
		switch {
		case used > 0 && ctx.Err() == nil && elapsed >= budget:
			// Slow as well as hungry: the time budget, which names the
			// line the time went to, says it. Unmetered, the evaluation
			// stops at the deadline, having allocated at the rate that
			// took the budget's time to reach the memory budget.
			if _, terr := set.evaluate(ctx, budget, s.Input); errors.As(terr, &derr) {
				return &BudgetError{Sample: s.Name, Description: s.Description, Budget: budget, Module: derr.Module, Line: derr.Line}
			}
			fallthrough
		case used > 0 && ctx.Err() == nil:
			return &MemoryBudgetError{
				Module: set.memoryCulprit(ctx, s, memory), Sample: s.Name, Description: s.Description,
				Allocated: used, Budget: memory,
			}
		case err == nil:
		case derr != nil:
			return &BudgetError{Sample: s.Name, Description: s.Description, Budget: budget, Module: derr.Module, Line: derr.Line}
		case ctx.Err() != nil:
			return err
		default:
			return policyError([]PolicyProblem{evalProblem(err, s)})
		}
	}
	return nil
}

// evalProblem is an evaluation error on a sample, at OPA's location of it
// when it has one.
func evalProblem(err error, s Sample) PolicyProblem {
	p := PolicyProblem{Message: fmt.Sprintf("fails to evaluate on the sample input %s (%s): %v", s.Name, s.Description, err)}
	var te *topdown.Error
	if errors.As(err, &te) && te.Location != nil {
		p.File, p.Line = te.Location.File, te.Location.Row
		p.Message = fmt.Sprintf("%s: %s (on the sample input %s: %s)", te.Code, te.Message, s.Name, s.Description)
	}
	return p
}

// deadlineError re-evaluates value with a profiler to find the module an
// evaluation cut off at timeout spent its time in.
func (set *policySet) deadlineError(ctx context.Context, value ast.Value, timeout time.Duration, cause error) *DeadlineError {
	module, line := set.attribute(ctx, value, attributionTimeout)
	return &DeadlineError{
		Revision: set.revision, Deadline: timeout, Module: module, Line: line,
		ConfigMap: set.modules[module].ConfigMap, err: cause,
	}
}

// attribute evaluates the query on value for at most timeout with a
// profiling tracer, and returns the non-test module the evaluation spent the
// most time in, and the line of that module that took the most; "" when
// the time went to no module.
func (set *policySet) attribute(ctx context.Context, value ast.Value, timeout time.Duration) (module string, line int) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	h := &hotspots{spent: map[string]map[int]time.Duration{}}
	// The outcome does not matter: only where the time went.
	_, _ = set.query.Eval(ctx, rego.EvalParsedInput(value), rego.EvalQueryTracer(h), rego.EvalMetrics(metrics.NoOp()))
	h.charge(time.Now())
	var most time.Duration
	for file, rows := range h.spent {
		if _, ok := set.modules[file]; !ok {
			continue
		}
		var total, top time.Duration
		topRow := 0
		for row, d := range rows {
			total += d
			if d > top || (d == top && row < topRow) {
				top, topRow = d, row
			}
		}
		if total > most || (total == most && file < module) {
			most, module, line = total, file, topRow
		}
	}
	return module, line
}

// hotspots is a topdown.QueryTracer that charges the time between two
// evaluated expressions to the first one's file and line, as OPA's profiler
// does (without its writes to the shared compiled AST). It is used by one
// evaluation at a time.
type hotspots struct {
	last  *ast.Location
	since time.Time
	spent map[string]map[int]time.Duration // file, row → time
}

var _ topdown.QueryTracer = (*hotspots)(nil)

func (h *hotspots) Enabled() bool { return true }

func (h *hotspots) Config() topdown.TraceConfig { return topdown.TraceConfig{} }

func (h *hotspots) TraceEvent(e topdown.Event) {
	if e.Op != topdown.EvalOp && e.Op != topdown.RedoOp {
		return
	}
	expr, ok := e.Node.(*ast.Expr)
	if !ok || expr == nil {
		return
	}
	now := time.Now()
	h.charge(now)
	h.last, h.since = expr.Location, now
}

// charge adds the time from the last expression's start to now to it.
func (h *hotspots) charge(now time.Time) {
	if h.last == nil {
		return
	}
	rows := h.spent[h.last.File]
	if rows == nil {
		rows = map[int]time.Duration{}
		h.spent[h.last.File] = rows
	}
	rows[h.last.Row] += now.Sub(h.since)
	h.last = nil
}
