package validate

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
)

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
