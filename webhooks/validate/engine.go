package validate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/tester"
	"k8s.io/apimachinery/pkg/types"

	"github.com/virtstation/virtstation/policies"
)

// DefaultEvalTimeout bounds one evaluation when NewEngine is given no
// timeout. It sits well below the VM webhook's timeoutSeconds (5 s), which
// also has to cover reading the disk state and writing claims.
const DefaultEvalTimeout = 2 * time.Second

// testTimeout bounds each Rego test; the shipped ones take milliseconds.
const testTimeout = 5 * time.Second

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

// Module is one Rego file.
type Module struct {
	// Name is the file name, such as mount_path.rego or x_test.rego; it is
	// the file in compiler messages, and an operator module replaces the
	// shipped one of the same name.
	Name string
	// Source is the Rego text.
	Source string
	// ConfigMap is the policy ConfigMap the module came from; zero for a
	// shipped module. It does not count towards the Revision.
	ConfigMap types.NamespacedName
}

// ShippedModules returns the policies embedded from policies/, tests
// included, sorted by name.
func ShippedModules() []Module {
	names, err := fs.Glob(policies.FS, "*.rego")
	if err != nil {
		panic(fmt.Sprintf("embedded policies: %v", err)) // a constant pattern cannot be malformed
	}
	out := make([]Module, 0, len(names))
	for _, n := range names {
		b, err := policies.FS.ReadFile(n)
		if err != nil {
			panic(fmt.Sprintf("embedded policy %s: %v", n, err)) // embedded files are always readable
		}
		out = append(out, Module{Name: n, Source: string(b)})
	}
	return out
}

// Merge returns the shipped modules with the operator ones added, sorted by
// name. An operator module replaces the shipped module of the same name; of
// two operator modules with one name, the later wins.
func Merge(shipped, operator []Module) []Module {
	byName := make(map[string]Module, len(shipped)+len(operator))
	for _, m := range shipped {
		byName[m.Name] = m
	}
	for _, m := range operator {
		byName[m.Name] = m
	}
	out := make([]Module, 0, len(byName))
	for _, m := range byName {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Revision is a short hash of the modules' names and sources, independent
// of their order.
func Revision(modules []Module) string {
	sorted := append([]Module(nil), modules...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	h := sha256.New()
	for _, m := range sorted {
		fmt.Fprintf(h, "%d:%s%d:%s", len(m.Name), m.Name, len(m.Source), m.Source)
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

// PolicyError is a policy set that did not parse, compile or pass its
// tests. Error lists one problem a line, as file:line: message.
type PolicyError struct {
	Problems []PolicyProblem
}

// PolicyProblem is one compiler message or failed test.
type PolicyProblem struct {
	// File is the module name; empty when the problem has no location.
	File string
	// Line is 1-based; 0 when unknown.
	Line int
	// Message is the compiler's code and message, or the failed test.
	Message string
}

func (p PolicyProblem) String() string {
	switch {
	case p.File == "":
		return p.Message
	case p.Line == 0:
		return p.File + ": " + p.Message
	default:
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Message)
	}
}

func (e *PolicyError) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Files returns the modules the problems are in, sorted, without duplicates.
func (e *PolicyError) Files() []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range e.Problems {
		if p.File != "" && !seen[p.File] {
			seen[p.File] = true
			out = append(out, p.File)
		}
	}
	sort.Strings(out)
	return out
}

// disallowedBuiltin reports whether policies may not call the built-in:
// anything that reaches the network or the process's runtime (environment
// variables, configuration).
func disallowedBuiltin(name string) bool {
	return name == "http.send" || strings.HasPrefix(name, "net.") || name == "opa.runtime"
}

// capabilities is OPA's capabilities without the disallowed built-ins and
// with no network host allowed. Built once; the compiler only reads it.
var capabilities = sync.OnceValue(func() *ast.Capabilities {
	c := ast.CapabilitiesForThisVersion()
	builtins := c.Builtins[:0:0]
	for _, b := range c.Builtins {
		if !disallowedBuiltin(b.Name) {
			builtins = append(builtins, b)
		}
	}
	c.Builtins = builtins
	c.AllowNet = []string{}
	return c
})

// parse parses the modules as Rego v1.
func parse(modules []Module) (map[string]*ast.Module, error) {
	parsed := make(map[string]*ast.Module, len(modules))
	var problems []PolicyProblem
	for _, m := range modules {
		if _, dup := parsed[m.Name]; dup {
			problems = append(problems, PolicyProblem{File: m.Name, Message: "module given twice"})
			continue
		}
		mod, err := ast.ParseModuleWithOpts(m.Name, m.Source, ast.ParserOptions{
			RegoVersion: ast.RegoV1, Capabilities: capabilities(), ProcessAnnotation: true,
		})
		if err != nil {
			problems = append(problems, problemsOf(err, m.Name)...)
			continue
		}
		if mod == nil {
			problems = append(problems, PolicyProblem{File: m.Name, Message: "rego_parse_error: empty module (want a package declaration)"})
			continue
		}
		parsed[m.Name] = mod
	}
	if len(problems) > 0 {
		return nil, policyError(problems)
	}
	return parsed, nil
}

// newCompiler is the compiler every policy set goes through: strict mode,
// Rego v1, restricted capabilities.
func newCompiler() *ast.Compiler {
	return ast.NewCompiler().
		WithStrict(true).
		WithCapabilities(capabilities()).
		WithDefaultRegoVersion(ast.RegoV1)
}

// Compile parses and compiles the modules (tests included) as Rego v1 in
// strict mode, without network or runtime built-ins. A failure is a
// *PolicyError carrying the compiler's messages with file and line.
func Compile(modules []Module) (*ast.Compiler, error) {
	parsed, err := parse(modules)
	if err != nil {
		return nil, err
	}
	c := newCompiler()
	if c.Compile(parsed); c.Failed() {
		return nil, policyError(problemsOf(c.Errors, ""))
	}
	return c, nil
}

// RunTests runs the test_ rules of the modules with OPA's tester, each
// within a few seconds and all within ctx. When any fails (or the modules do
// not compile) it returns a *PolicyError naming each failed test and where
// it is.
func RunTests(ctx context.Context, modules []Module) error {
	parsed, err := parse(modules)
	if err != nil {
		return err
	}
	results, err := tester.NewRunner().
		SetCompiler(newCompiler().WithEnablePrintStatements(true)).
		SetDefaultRegoVersion(ast.RegoV1).
		SetTimeout(testTimeout).
		CapturePrintOutput(true).
		SetModules(parsed).
		RunTests(ctx, nil)
	if err != nil {
		return policyError(problemsOf(err, ""))
	}
	var problems []PolicyProblem
	for r := range results {
		if r.Pass() || r.Skip {
			continue
		}
		p := PolicyProblem{Message: fmt.Sprintf("test %s.%s failed", r.Package, r.Name)}
		if r.Location != nil {
			p.File, p.Line = r.Location.File, r.Location.Row
		}
		if r.Error != nil {
			p.Message = fmt.Sprintf("test %s.%s: error: %v", r.Package, r.Name, r.Error)
		}
		if out := strings.TrimSpace(string(r.Output)); out != "" {
			p.Message += "; printed: " + out
		}
		problems = append(problems, p)
	}
	if len(problems) > 0 {
		return policyError(problems)
	}
	return ctx.Err()
}

// problemsOf turns OPA's errors into problems; file is the module for
// errors without a location.
func problemsOf(err error, file string) []PolicyProblem {
	var astErrs ast.Errors
	if !errors.As(err, &astErrs) {
		var one *ast.Error
		if !errors.As(err, &one) {
			return []PolicyProblem{{File: file, Message: err.Error()}}
		}
		astErrs = ast.Errors{one}
	}
	out := make([]PolicyProblem, 0, len(astErrs))
	for _, e := range astErrs {
		p := PolicyProblem{File: file, Message: e.Code + ": " + e.Message}
		if e.Location != nil {
			if e.Location.File != "" {
				p.File = e.Location.File
			}
			p.Line = e.Location.Row
		}
		if e.Code == ast.TypeErr && strings.HasPrefix(e.Message, "undefined function ") &&
			disallowedBuiltin(strings.TrimPrefix(e.Message, "undefined function ")) {
			p.Message += " (built-ins that reach the network or the runtime, such as http.send, net.* and opa.runtime, are disabled in virtstation policies)"
		}
		out = append(out, p)
	}
	return out
}

func policyError(problems []PolicyProblem) *PolicyError {
	sort.SliceStable(problems, func(i, j int) bool {
		if problems[i].File != problems[j].File {
			return problems[i].File < problems[j].File
		}
		return problems[i].Line < problems[j].Line
	})
	return &PolicyError{Problems: problems}
}

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
}

// newPolicySet prepares the query on the compiled modules.
func newPolicySet(ctx context.Context, compiler *ast.Compiler, modules []Module) (*policySet, error) {
	q, err := rego.New(rego.Query(query), rego.Compiler(compiler)).PrepareForEval(ctx)
	if err != nil {
		return nil, fmt.Errorf("prepare policy query: %w", err)
	}
	set := &policySet{query: q, revision: Revision(modules), reads: readInput(compiler), modules: map[string]Module{}}
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

// ReadyCheck is a healthz.Checker: it fails until a policy set is active.
func (e *Engine) ReadyCheck(_ *http.Request) error {
	if !e.Ready() {
		return ErrNotReady
	}
	return nil
}

// Evaluate evaluates the active policy set on input (see BuildInput) within
// the engine's timeout.
func (e *Engine) Evaluate(ctx context.Context, input map[string]any) (Decision, error) {
	set := e.active.Load()
	if set == nil {
		return Decision{}, ErrNotReady
	}
	return set.evaluate(ctx, e.timeout, input)
}

// EvaluateRequest evaluates the active policy set on the request and the
// disks' state, as Evaluate does on r.Input(disks), but builds only the
// parts of the input that the set reads: an UPDATE's oldObject is not
// decoded, nor userInfo converted, unless a policy reads them.
func (e *Engine) EvaluateRequest(ctx context.Context, r Request, disks map[string]DiskState) (Decision, error) {
	set := e.active.Load()
	if set == nil {
		return Decision{}, ErrNotReady
	}
	input, err := r.input(disks, set.reads)
	if err != nil {
		return Decision{}, err
	}
	return set.evaluate(ctx, e.timeout, input)
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
