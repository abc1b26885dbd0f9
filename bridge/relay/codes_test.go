package relay

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pagePolicy is the browser client's close-code policy, which copies the
// codes below into its Code object.
const pagePolicy = "../../web/src/policy.js"

// goCodes is every Code constant of codes.go by name. The test checks this
// map against codes.go's source, so a constant added there and not here fails.
var goCodes = map[string]int{
	"CodeHTTPBase":          CodeHTTPBase,
	"CodeTakenOver":         CodeTakenOver,
	"CodeIdle":              CodeIdle,
	"CodeSessionLost":       CodeSessionLost,
	"CodeUpstreamClosed":    CodeUpstreamClosed,
	"CodeSSHHostKeyChanged": CodeSSHHostKeyChanged,
	"CodeSSHAuthFailed":     CodeSSHAuthFailed,
	"CodeSSHUnreachable":    CodeSSHUnreachable,
	"CodeBadHello":          CodeBadHello,
	"CodeGoingAway":         CodeGoingAway,
	"CodeClientTooSlow":     CodeClientTooSlow,
	"CodeProtocolError":     CodeProtocolError,
	"CodeNormal":            CodeNormal,
}

// TestCloseCodesMatchThePage keeps web/src/policy.js's Code object equal to
// the close codes the bridge sends: the same names (less the "Code" prefix)
// with the same values, none missing on either side. A page with a stale
// code would, say, reconnect after a take-over.
func TestCloseCodesMatchThePage(t *testing.T) {
	declared := declaredCodes(t, "codes.go")
	if !slices.Equal(declared, slices.Sorted(maps.Keys(goCodes))) {
		t.Fatalf("codes.go declares %v; goCodes in this test lists %v: add the new constant to goCodes", declared, slices.Sorted(maps.Keys(goCodes)))
	}
	src, err := os.ReadFile(pagePolicy)
	if err != nil {
		t.Fatal(err)
	}
	page, err := parsePageCodes(string(src))
	if err != nil {
		t.Fatalf("%s: %v", pagePolicy, err)
	}
	for name, want := range goCodes {
		js := strings.TrimPrefix(name, "Code")
		got, ok := page[js]
		switch {
		case !ok:
			t.Errorf("%s has no Code.%s; add %s: %d", pagePolicy, js, js, want)
		case got != want:
			t.Errorf("%s: Code.%s = %d, want %d as relay.%s", pagePolicy, js, got, want, name)
		}
	}
	for js := range page {
		if _, ok := goCodes["Code"+js]; !ok {
			t.Errorf("%s: Code.%s is no close code of bridge/relay/codes.go", pagePolicy, js)
		}
	}
}

// declaredCodes lists, sorted, the names of the exported Code constants a
// Go file declares.
func declaredCodes(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for _, n := range vs.Names {
				if strings.HasPrefix(n.Name, "Code") && n.IsExported() {
					names = append(names, n.Name)
				}
			}
		}
	}
	slices.Sort(names)
	return names
}

var (
	pageCodeBlock = regexp.MustCompile(`(?s)export const Code = Object\.freeze\(\{(.*?)\}\);`)
	pageCodeEntry = regexp.MustCompile(`^\s*([A-Za-z]+): (\d+),?\s*$`)
)

// parsePageCodes reads the entries of policy.js's
// `export const Code = Object.freeze({ Name: 4001, … });`, one a line.
func parsePageCodes(src string) (map[string]int, error) {
	m := pageCodeBlock.FindStringSubmatch(src)
	if m == nil {
		return nil, errors.New("no `export const Code = Object.freeze({ … });`")
	}
	out := map[string]int{}
	for line := range strings.Lines(m[1]) {
		if strings.TrimSpace(line) == "" {
			continue
		}
		e := pageCodeEntry.FindStringSubmatch(line)
		if e == nil {
			return nil, fmt.Errorf("code entry %q: want `Name: 4001,` alone on the line", strings.TrimSpace(line))
		}
		if _, dup := out[e[1]]; dup {
			return nil, fmt.Errorf("code entry %q: a second entry of that name", strings.TrimSpace(line))
		}
		v, err := strconv.Atoi(e[2])
		if err != nil {
			return nil, fmt.Errorf("code entry %q: %w", strings.TrimSpace(line), err)
		}
		out[e[1]] = v
	}
	return out, nil
}

// FuzzParsePageCodes: the parser of policy.js's Code object never panics,
// and what it accepts it reads back the same from its own rendering.
func FuzzParsePageCodes(f *testing.F) {
	if src, err := os.ReadFile(pagePolicy); err == nil {
		f.Add(string(src))
	}
	f.Add("export const Code = Object.freeze({\n  A: 1,\n});")
	f.Add("export const Code = Object.freeze({ A: 1 });")
	f.Fuzz(func(t *testing.T, src string) {
		got, err := parsePageCodes(src)
		if err != nil {
			return
		}
		var b strings.Builder
		b.WriteString("export const Code = Object.freeze({\n")
		for _, k := range slices.Sorted(maps.Keys(got)) {
			b.WriteString("  " + k + ": " + strconv.Itoa(got[k]) + ",\n")
		}
		b.WriteString("});")
		again, err := parsePageCodes(b.String())
		if err != nil || !maps.Equal(got, again) {
			t.Fatalf("parse(%q) = %v; its rendering parses to %v, %v", src, got, again, err)
		}
	})
}
