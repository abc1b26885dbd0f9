package validate

import (
	"context"

	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/policy"
)

// rulesPackage is the package every rule module sits under.
var rulesPackage = ast.MustParseRef("data.virtstation.rules")

// RegoRuleIDs returns the rule ids the policy modules define, sorted: in
// each module of a package under virtstation.rules (tests aside), the value
// of a constant rule_id (or each of a constant set rule_ids), and every
// string an object term gives for its "id" key, either literally
// ({"id": "disk-limit", …}) or through a constant of the package
// ({"id": rule_id, …}). An id a rule computes at evaluation time is found
// only when the package declares it in rule_id or rule_ids. A module that
// does not parse is skipped (Compile reports it).
func RegoRuleIDs(modules []Module) []string {
	ids := sets.New[string]()
	for _, m := range modules {
		if strings.HasSuffix(m.Name, "_test.rego") {
			continue
		}
		mod, err := ast.ParseModuleWithOpts(m.Name, m.Source, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil || mod == nil || !mod.Package.Path.HasPrefix(rulesPackage) {
			continue
		}
		consts := map[string]string{}
		for _, r := range mod.Rules {
			name, ok := ruleName(r)
			if !ok || len(r.Head.Args) > 0 || r.Head.Key != nil || r.Head.Value == nil {
				continue
			}
			switch v := r.Head.Value.Value.(type) {
			case ast.String:
				consts[name] = string(v)
				if name == "rule_id" {
					ids.Insert(string(v))
				}
			case ast.Set:
				if name == "rule_ids" {
					v.Foreach(func(t *ast.Term) {
						if s, ok := t.Value.(ast.String); ok {
							ids.Insert(string(s))
						}
					})
				}
			}
		}
		for _, r := range mod.Rules {
			ast.WalkTerms(r, func(t *ast.Term) bool {
				obj, ok := t.Value.(ast.Object)
				if !ok {
					return false
				}
				switch v := termValue(obj.Get(ast.StringTerm("id"))).(type) {
				case ast.String:
					ids.Insert(string(v))
				case ast.Var:
					if s, ok := consts[string(v)]; ok {
						ids.Insert(s)
					}
				}
				return false
			})
		}
	}
	return sets.List(ids)
}

func termValue(t *ast.Term) ast.Value {
	if t == nil {
		return nil
	}
	if ref, ok := t.Value.(ast.Ref); ok && len(ref) == 1 {
		return ref[0].Value
	}
	return t.Value
}

// ruleName is the name of a rule whose head is a plain name (rule_id := …).
func ruleName(r *ast.Rule) (string, bool) {
	ref := r.Head.Ref()
	if len(ref) != 1 {
		return "", false
	}
	v, ok := ref[0].Value.(ast.Var)
	return string(v), ok
}

// modeRulesOf returns the rule ids the enforcement modes can name with the
// policy set modules, sorted: the Go checks that take a mode
// (policy.GoRules) and the Rego rules of the set. A Rego rule that reuses
// the id of a Go check that always denies does not make that id take a
// mode: the Go check would still deny.
func modeRulesOf(modules []Module) []string {
	ids := sets.New(RegoRuleIDs(modules)...)
	for _, r := range policy.GoRules {
		if r.Modes {
			ids.Insert(r.ID)
		} else {
			ids.Delete(r.ID)
		}
	}
	return sets.List(ids)
}

// modeRules returns the rule ids the modes ConfigMap may name, with the
// policy set the loader loads: the shipped modules and those of the policy
// ConfigMaps in the namespace (the shipped ones only without a Reader).
func (v *ConfigMapValidator) modeRules(ctx context.Context) ([]string, error) {
	var operator []Module
	if v.Reader != nil {
		cms, err := ListPolicyConfigMaps(ctx, v.Reader, v.Namespace)
		if err != nil {
			return nil, err
		}
		operator, _ = OperatorModules(cms)
	}
	return modeRulesOf(Merge(ShippedModules(), operator)), nil
}

// validateModesConfigMap checks the modes ConfigMap's data against the rules
// of the policy set.
func (v *ConfigMapValidator) validateModesConfigMap(ctx context.Context, cm *corev1.ConfigMap) (field.ErrorList, error) {
	known, err := v.modeRules(ctx)
	if err != nil {
		return nil, err
	}
	return policy.ValidateModes(cm.Data, field.NewPath("data"), known), nil
}
