package validate

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/tester"
)

// testTimeout bounds each Rego test; the shipped ones take milliseconds.
const testTimeout = 5 * time.Second

// RunTests runs the test_ rules of the modules with OPA's tester, each
// within a few seconds and all within ctx. When any fails (or the modules do
// not compile) it returns a *PolicyError naming each failed test and where
// it is.
func RunTests(ctx context.Context, modules []Module) error {
	parsed, err := parse(modules)
	if err != nil {
		return err
	}
	results, err := newTestRunner(parsed).RunTests(ctx, nil)
	if err != nil {
		return policyError(problemsOf(err, ""))
	}
	var problems []PolicyProblem
	for r := range results {
		if p, failed := testProblem(r); failed {
			problems = append(problems, p)
		}
	}
	if len(problems) > 0 {
		return policyError(problems)
	}
	return ctx.Err()
}

// newTestRunner is OPA's test runner as RunTests runs it.
func newTestRunner(parsed map[string]*ast.Module) *tester.Runner {
	return tester.NewRunner().
		SetCompiler(newCompiler().WithEnablePrintStatements(true)).
		SetDefaultRegoVersion(ast.RegoV1).
		SetTimeout(testTimeout).
		CapturePrintOutput(true).
		SetModules(parsed)
}

// testProblem is the problem a failed test result reports; false when the
// test passed or was skipped.
func testProblem(r *tester.Result) (PolicyProblem, bool) {
	if r.Pass() || r.Skip {
		return PolicyProblem{}, false
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
	return p, true
}
