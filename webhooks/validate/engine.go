package validate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"

	"github.com/virtstation/virtstation/policy"
)

// DefaultEvalTimeout bounds one evaluation when NewEngine is given no
// timeout. It sits well below the VM webhook's timeoutSeconds (5 s), which
// also has to cover reading the disk state and writing claims.
const DefaultEvalTimeout = 2 * time.Second

// ErrNotReady is returned by Evaluate before any policy set is loaded.
var ErrNotReady = errors.New("no policy set is loaded yet")

// Engine evaluates the active policy set. Load swaps in a new set
// atomically; Evaluate always runs against one whole set. An Engine is safe
// for concurrent use.
type Engine struct {
	timeout time.Duration
	loadMu  sync.Mutex // serialises Load
	active  atomic.Pointer[policySet]
	// noPrune converts all of the input (tests compare against it).
	noPrune bool
}

// policySet is a compiled, tested and prepared set of modules.
type policySet struct {
	query    rego.PreparedEvalQuery
	revision string
	// reads is what the set reads of input; nil means all of it.
	reads *inputShape
	// modules are the set's modules by name, tests left out: where an
	// evaluation that ran past its deadline may have spent its time.
	modules map[string]Module
	// rules are the rule ids the set's modules define (RegoRuleIDs).
	rules []string
}

// newPolicySet prepares the query on the compiled modules.
func newPolicySet(ctx context.Context, compiler *ast.Compiler, modules []Module) (*policySet, error) {
	q, err := rego.New(rego.Query(query), rego.Compiler(compiler)).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare policy query: %w", err)
	}
	set := &policySet{query: q, revision: Revision(modules), reads: readInput(compiler), modules: map[string]Module{}, rules: RegoRuleIDs(modules)}
	for _, m := range modules {
		if !strings.HasSuffix(m.Name, "_test.rego") {
			set.modules[m.Name] = m
		}
	}
	return set, nil
}

// NewEngine returns an engine with no policy set (not Ready) whose
// evaluations are bounded by timeout (DefaultEvalTimeout when zero or
// negative).
func NewEngine(timeout time.Duration) *Engine {
	if timeout <= 0 {
		timeout = DefaultEvalTimeout
	}
	return &Engine{timeout: timeout}
}

// Load compiles the modules, runs their tests and prepares the query for
// data.virtstation.deny and .warn. On success it makes them the active set
// and returns its revision (see Revision); on failure the previous set stays
// active and the error is a *PolicyError when the policies are at fault.
func (e *Engine) Load(ctx context.Context, modules []Module) (string, error) {
	e.loadMu.Lock()
	defer e.loadMu.Unlock()
	compiler, err := Compile(modules)
	if err != nil {
		return "", err
	}
	for _, ref := range []string{denyRef, warnRef} {
		if len(compiler.GetRulesExact(ast.MustParseRef(ref))) == 0 {
			return "", policyError([]PolicyProblem{{Message: fmt.Sprintf(
				"the policy set defines no %s rule; the webhook queries it (keep policies/virtstation.rego, or an override of it that defines deny and warn)", ref)}})
		}
	}
	if err := RunTests(ctx, modules); err != nil {
		return "", err
	}
	set, err := newPolicySet(ctx, compiler, modules)
	if err != nil {
		return "", err
	}
	if e.noPrune {
		set.reads = nil
	}
	e.active.Store(set)
	return set.revision, nil
}

// Ready reports whether a policy set is active.
func (e *Engine) Ready() bool { return e.active.Load() != nil }

// Revision is the active policy set's revision; empty before the first Load.
func (e *Engine) Revision() string {
	if s := e.active.Load(); s != nil {
		return s.revision
	}
	return ""
}

// Rules are the rule ids the active policy set defines, sorted (see
// RegoRuleIDs); nil before the first Load. The policy audit reports a
// result for each of them on every VM.
func (e *Engine) Rules() []string {
	if s := e.active.Load(); s != nil {
		return s.rules
	}
	return nil
}

// ReadyCheck is a healthz.Checker: it fails until a policy set is active.
func (e *Engine) ReadyCheck(_ *http.Request) error {
	if !e.Ready() {
		return ErrNotReady
	}
	return nil
}

// Evaluate evaluates the active policy set on input (see BuildInput) within
// the engine's timeout.
func (e *Engine) Evaluate(ctx context.Context, input map[string]any) (policy.Decision, error) {
	set := e.active.Load()
	if set == nil {
		return policy.Decision{}, ErrNotReady
	}
	return set.evaluate(ctx, e.timeout, input)
}

// EvaluateRequest evaluates the active policy set on the request and the
// disks' state, as Evaluate does on r.Input(disks), but builds only the
// parts of the input that the set reads: an UPDATE's oldObject is not
// decoded, nor userInfo converted, unless a policy reads them.
func (e *Engine) EvaluateRequest(ctx context.Context, r Request, disks map[string]DiskState) (policy.Decision, error) {
	set := e.active.Load()
	if set == nil {
		return policy.Decision{}, ErrNotReady
	}
	input, err := r.input(disks, set.reads)
	if err != nil {
		return policy.Decision{}, err
	}
	return set.evaluate(ctx, e.timeout, input)
}
