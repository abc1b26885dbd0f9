package validate

import (
	"context"
	"errors"
	"fmt"
	"runtime/metrics"
	"strings"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	opametrics "github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// PolicyMemoryBudget is how much heap one policy test, or one evaluation of
// the policy set on a sample input, may allocate when a policy ConfigMap is
// applied. OPA has no memory limit of its own (no per-query limit in its
// rego or topdown packages), so the check meters the process's allocations
// (runtime/metrics /gc/heap/allocs:bytes) while it runs, and stops the
// test or evaluation once it goes over: a policy that builds a huge value
// (numbers.range(1, 3e6) is about 330 MiB) is refused at kubectl apply,
// naming its module, before it can take the webhook's memory (512 MiB in
// the chart) at admission. The shipped tests and samples allocate under
// 2 MiB each; 64 MiB leaves an operator policy 30 times that, and eight
// admissions' worth of the webhook's memory headroom.
const PolicyMemoryBudget = 64 << 20

// memoryPollInterval is how often the allocation meter reads the counter.
// Allocating runs at most a few GB/s, so a test goes at most a few MiB
// over the budget before it is stopped; reading the counter takes about a
// microsecond.
const memoryPollInterval = time.Millisecond

// memoryAttempts is how often a test or sample must go over the budget to
// be refused: the meter counts the whole process's allocations, so a burst
// of admissions served at the same moment can push one run over; a policy
// that allocates that much does so every time.
const memoryAttempts = 2

// MemoryBudgetError is a policy test, or an evaluation on a sample input,
// that allocated more than its budget and was stopped.
type MemoryBudgetError struct {
	// Module is the module (file) of the test, or the one the evaluation
	// was in when it was stopped; empty when none could be singled out.
	Module string
	// Test is the test that went over (package.name); empty for a sample.
	Test string
	// Sample is the sample input's name, and Description what it is, when
	// an evaluation went over.
	Sample, Description string
	// Allocated is at least what it allocated before it was stopped.
	Allocated uint64
	// Budget is PolicyMemoryBudget.
	Budget uint64
}

func (e *MemoryBudgetError) Error() string {
	return fmt.Sprintf("%s allocated more than the %s memory budget (stopped at %s)%s", e.what(), mib(e.Budget), mib(e.Allocated), e.where())
}

// what is the test or the evaluation.
func (e *MemoryBudgetError) what() string {
	if e.Test != "" {
		return "test " + e.Test
	}
	if e.Sample != "" {
		return fmt.Sprintf("evaluating the policies on the sample input %s (%s)", e.Sample, e.Description)
	}
	return "the policy tests"
}

func (e *MemoryBudgetError) where() string {
	if e.Module == "" {
		return ""
	}
	return ", in module " + e.Module
}

// mib is n in MiB.
func mib(n uint64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }

// allocMeter stops work that allocates more than budget: it reads the
// process's cumulative heap allocation every memoryPollInterval and cancels
// its context once the allocation since the last reset is over budget.
type allocMeter struct {
	budget uint64
	base   atomic.Uint64
	over   atomic.Uint64 // what was allocated when it tripped; 0: not tripped
	cancel context.CancelFunc
	done   chan struct{}
}

// heapAllocated is the process's cumulative heap allocation in bytes.
func heapAllocated() uint64 {
	s := [1]metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s[:])
	return s[0].Value.Uint64()
}

// startAllocMeter returns a context that is cancelled when the work done
// under it allocates more than budget since the meter's last reset. Call
// stop when done.
func startAllocMeter(ctx context.Context, budget uint64) (context.Context, *allocMeter) {
	ctx, cancel := context.WithCancel(ctx)
	m := &allocMeter{budget: budget, cancel: cancel, done: make(chan struct{})}
	m.reset()
	go m.run(ctx)
	return ctx, m
}

func (m *allocMeter) run(ctx context.Context) {
	defer close(m.done)
	tick := time.NewTicker(memoryPollInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if used := heapAllocated() - m.base.Load(); used > m.budget {
			m.over.Store(used)
			m.cancel()
			return
		}
	}
}

// reset starts counting from now.
func (m *allocMeter) reset() { m.base.Store(heapAllocated()) }

// tripped is what had been allocated when the meter stopped the work; 0
// when it did not.
func (m *allocMeter) tripped() uint64 { return m.over.Load() }

// stop stops the meter.
func (m *allocMeter) stop() {
	m.cancel()
	<-m.done
}

// RunTestsWithin is RunTests, one test at a time, each within budget
// bytes of heap allocation: a test that goes over (twice, see
// memoryAttempts) is stopped and the result is a *MemoryBudgetError naming
// it and its module. Failed tests are a *PolicyError, as from RunTests.
func RunTestsWithin(ctx context.Context, modules []Module, budget uint64) error {
	parsed, err := parse(modules)
	if err != nil {
		return err
	}
	for attempt := 1; ; attempt++ {
		err := runTestsWithin(ctx, parsed, budget)
		var over *MemoryBudgetError
		if !errors.As(err, &over) || attempt == memoryAttempts {
			return err
		}
	}
}

// runTestsWithin is one metered run of the tests.
func runTestsWithin(ctx context.Context, parsed map[string]*ast.Module, budget uint64) error {
	// The runner compiles its modules before it returns; the meter starts
	// after that, so it counts the tests alone.
	mctx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	runner := newTestRunner(parsed).SetParallel(1)
	results, err := runner.RunTests(mctx, nil)
	if err != nil {
		return policyError(problemsOf(err, ""))
	}
	metered, meter := startAllocMeter(mctx, budget)
	defer meter.stop()
	// The runner's tests take the context they were started with; the
	// meter's cancels them through cancelRun.
	go func() {
		<-metered.Done()
		cancelRun()
	}()
	var problems []PolicyProblem
	var over *MemoryBudgetError
	for r := range results {
		if used := meter.tripped(); used > 0 && over == nil {
			// One test runs at a time: the one that went over is the
			// first to report after the meter tripped.
			over = &MemoryBudgetError{Test: r.Package + "." + r.Name, Allocated: used, Budget: budget}
			if r.Location != nil {
				over.Module = r.Location.File
			}
			continue
		}
		meter.reset()
		if p, failed := testProblem(r); failed && over == nil {
			problems = append(problems, p)
		}
	}
	switch {
	case over != nil:
		return over
	case meter.tripped() > 0:
		return &MemoryBudgetError{Allocated: meter.tripped(), Budget: budget}
	case len(problems) > 0:
		return policyError(problems)
	}
	return ctx.Err()
}

// memoryCulprit evaluates the sample once more, metered, with a tracer that
// keeps the last expression evaluated: when the meter stops the
// evaluation, that expression is the one allocating, and its module is
// returned ("" when it is in no module of the set, or the run stayed under
// budget this time).
func (set *policySet) memoryCulprit(ctx context.Context, s Sample, budget uint64) string {
	value, err := ast.InterfaceToValue(set.reads.prune(s.Input))
	if err != nil {
		return ""
	}
	mctx, meter := startAllocMeter(ctx, budget)
	defer meter.stop()
	last := &lastExpr{}
	_, _ = set.query.Eval(mctx, rego.EvalParsedInput(value), rego.EvalQueryTracer(last), rego.EvalMetrics(opametrics.NoOp()))
	if meter.tripped() == 0 || last.loc == nil {
		return ""
	}
	if _, ok := set.modules[last.loc.File]; !ok {
		return ""
	}
	return last.loc.File
}

// lastExpr is a topdown.QueryTracer that keeps the location of the last
// expression evaluated. It is used by one evaluation at a time.
type lastExpr struct{ loc *ast.Location }

var _ topdown.QueryTracer = (*lastExpr)(nil)

func (l *lastExpr) Enabled() bool { return true }

func (l *lastExpr) Config() topdown.TraceConfig { return topdown.TraceConfig{} }

func (l *lastExpr) TraceEvent(e topdown.Event) {
	if e.Op != topdown.EvalOp && e.Op != topdown.RedoOp {
		return
	}
	if expr, ok := e.Node.(*ast.Expr); ok && expr != nil && expr.Location != nil {
		if !strings.HasSuffix(expr.Location.File, "_test.rego") {
			l.loc = expr.Location
		}
	}
}
