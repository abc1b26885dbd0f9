package validate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/policy"
	"github.com/virtstation/virtstation/webhooks/admit"
)

// ConfigMapPath is where the validating webhook for policy ConfigMaps is
// served.
const ConfigMapPath = "/validate-v1-configmap-policy"

// configMapCheckTimeout bounds compiling and testing a policy set at apply
// time; with budgetCheckTimeout it must stay below the webhook's
// timeoutSeconds (10), leaving the round trip a couple of seconds.
const configMapCheckTimeout = 7 * time.Second

// budgetCheckTimeout bounds timing the policy set on the sample inputs. By
// construction that takes at most one PolicyBudget per sample, one more for
// the retry and one attributionTimeout (0.7 s with four samples); this is
// the backstop.
const budgetCheckTimeout = time.Second

// The objectSelector sends only ConfigMaps that carry the
// virtstation.io/policy label (any value) here: the policy ConfigMaps
// (virtstation.io/policy=true) and, when labelled, the modes ConfigMap
// virtstation-policy-config. Nothing else in the cluster depends on this
// webhook, so failurePolicy=fail blocks only policy changes while it is down.
//
// +kubebuilder:webhookconfiguration:mutating=false,name=virtstation-validating
// +kubebuilder:webhook:path=/validate-v1-configmap-policy,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=configmaps,verbs=create;update,versions=v1,name=policy.validate.virtstation.io,admissionReviewVersions=v1,timeoutSeconds=10,serviceName=virtstation-webhook,serviceNamespace=virtstation-system,patch=`{"objectSelector":{"matchExpressions":[{"key":"virtstation.io/policy","operator":"Exists"}]}}`

// ConfigMapValidator is the validating webhook for policy ConfigMaps in
// Namespace. It rejects, at apply time, operator Rego that does not parse or
// compile, uses a disallowed built-in, or whose tests (or the shipped tests)
// fail with it, naming the key and quoting the compiler's file:line message;
// Rego whose evaluation on one of the sample inputs (see Samples) takes
// longer than PolicyBudget, naming the key the time went to; Rego whose
// tests, or evaluation on a sample input, allocate more than
// PolicyMemoryBudget, naming the key; and
// enforcement modes that do not parse or name a rule that cannot take one
// (an id no rule defines, or a Go check that always denies). Safe for
// concurrent use.
type ConfigMapValidator struct {
	// Namespace is the install namespace; ConfigMaps elsewhere are admitted
	// with a warning that Virtstation ignores them.
	Namespace string
	// Reader, when set, lists the other policy ConfigMaps, so the ConfigMap
	// is checked within the whole set the loader will load. Without it the
	// ConfigMap is checked with the shipped modules only.
	Reader client.Reader

	// checking serializes the policy checks: each meters the process's
	// allocations (PolicyMemoryBudget), which another check running at the
	// same time would add to; and two at once would need twice the memory.
	checking sync.Mutex
}

var _ admission.Handler = (*ConfigMapValidator)(nil)

// Handle implements admission.Handler.
func (v *ConfigMapValidator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if !admit.CreateOrUpdate(req) {
		return admission.Allowed("")
	}
	var cm corev1.ConfigMap
	if err := json.Unmarshal(req.Object.Raw, &cm); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decode ConfigMap: %w", err))
	}
	if cm.Namespace == "" {
		cm.Namespace = req.Namespace
	}
	if cm.Name == "" {
		cm.Name = req.Name
	}
	isPolicy := cm.Labels[api.LabelPolicy] == api.LabelTrue
	if !isPolicy && cm.Name != policy.ModesConfigMapName {
		return admission.Allowed("")
	}
	if cm.Namespace != v.Namespace {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"virtstation reads policy ConfigMaps only in namespace %s; this one is ignored", v.Namespace))
	}
	var errs field.ErrorList
	var warnings []string
	if cm.Name == policy.ModesConfigMapName {
		merrs, err := v.validateModesConfigMap(ctx, &cm)
		if err != nil {
			logf.FromContext(ctx).Error(err, "check enforcement modes", "uid", req.UID, "configMap", cm.Name)
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf(
				"virtstation could not check the enforcement modes; see the webhook log for request %s", req.UID))
		}
		errs = append(errs, merrs...)
	}
	if isPolicy {
		perrs, pwarn, err := v.validatePolicy(ctx, &cm)
		if err != nil {
			logf.FromContext(ctx).Error(err, "check policy ConfigMap", "uid", req.UID, "configMap", cm.Name)
			return admit.Internal(req.UID, "check the policies")
		}
		errs = append(errs, perrs...)
		warnings = append(warnings, pwarn...)
	}
	if len(errs) > 0 {
		resp := admit.Deny(errs)
		resp.Warnings = warnings
		return resp
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// validatePolicy compiles and tests the policy set with cm's modules in it.
// err is set only when the check itself could not run.
func (v *ConfigMapValidator) validatePolicy(ctx context.Context, cm *corev1.ConfigMap) (field.ErrorList, []string, error) {
	errs, warnings := policyShape(cm)
	if own, _ := OperatorModules([]corev1.ConfigMap{*cm}); len(own) == 0 {
		return errs, warnings, nil
	}
	cms, err := v.withOthers(ctx, cm)
	if err != nil {
		return nil, nil, err
	}
	operator, owners := OperatorModules(cms)
	err = v.checkModules(ctx, Merge(ShippedModules(), operator))
	if err == nil {
		return errs, warnings, nil
	}
	ferrs, err := policyFieldErrors(err, cm.Name, owners)
	if err != nil {
		return nil, nil, err
	}
	return append(errs, ferrs...), warnings, nil
}

// policyShape checks where cm keeps its modules: binaryData is refused,
// and keys that are not modules are pointed out.
func policyShape(cm *corev1.ConfigMap) (field.ErrorList, []string) {
	var errs field.ErrorList
	var warnings []string
	for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
		if strings.HasSuffix(k, ".rego") {
			errs = append(errs, field.Invalid(field.NewPath("binaryData").Key(k), field.OmitValueType{},
				"Rego modules are read from data only (fix: move the module to data)"))
		}
	}
	own, _ := OperatorModules([]corev1.ConfigMap{*cm})
	if len(own) == 0 && cm.Name != policy.ModesConfigMapName {
		warnings = append(warnings, fmt.Sprintf("ConfigMap %s is labelled %s=%s but has no data key ending in .rego; it adds no policy", cm.Name, api.LabelPolicy, api.LabelTrue))
	}
	for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
		if !strings.HasSuffix(k, ".rego") && cm.Name != policy.ModesConfigMapName {
			warnings = append(warnings, fmt.Sprintf("data[%s] is ignored: only keys ending in .rego are policy modules", k))
		}
	}
	return errs, warnings
}

// withOthers is the policy ConfigMaps as they would be with cm applied: the
// others of the namespace, in name order, with cm in its place.
func (v *ConfigMapValidator) withOthers(ctx context.Context, cm *corev1.ConfigMap) ([]corev1.ConfigMap, error) {
	if v.Reader == nil {
		return []corev1.ConfigMap{*cm}, nil
	}
	others, err := ListPolicyConfigMaps(ctx, v.Reader, v.Namespace)
	if err != nil {
		return nil, err
	}
	var cms []corev1.ConfigMap
	placed := false
	for _, o := range others {
		if o.Name == cm.Name {
			continue
		}
		if !placed && o.Name > cm.Name {
			cms, placed = append(cms, *cm), true
		}
		cms = append(cms, o)
	}
	if !placed {
		cms = append(cms, *cm)
	}
	return cms, nil
}

// checkModules compiles modules, runs their tests and times them on the
// sample inputs, one check at a time.
func (v *ConfigMapValidator) checkModules(ctx context.Context, modules []Module) error {
	v.checking.Lock()
	defer v.checking.Unlock()
	compiler, err := Compile(modules)
	if err == nil {
		err = withTimeout(ctx, configMapCheckTimeout, "the policy tests", "the tests", func(ctx context.Context) error {
			return RunTestsWithin(ctx, modules, PolicyMemoryBudget)
		})
	}
	if err == nil {
		err = withTimeout(ctx, budgetCheckTimeout, "timing the policies on the sample inputs", "the policies", func(ctx context.Context) error {
			return checkBudget(ctx, compiler, modules, Samples(), PolicyBudget)
		})
	}
	return err
}

// policyFieldErrors says what checkModules found, on the ConfigMap named
// name; err is returned when it is not a finding but a fault.
func policyFieldErrors(err error, name string, owners map[string][]string) (field.ErrorList, error) {
	data := field.NewPath("data")
	var (
		be *BudgetError
		me *MemoryBudgetError
		st *stepTimeout
		pe *PolicyError
	)
	switch {
	case errors.As(err, &be):
		return field.ErrorList{budgetFieldError(be, name, owners)}, nil
	case errors.As(err, &me):
		return field.ErrorList{memoryFieldError(me, name, owners)}, nil
	case errors.As(err, &st):
		return field.ErrorList{field.Invalid(data, field.OmitValueType{}, st.Error())}, nil
	case !errors.As(err, &pe):
		return nil, err
	}
	var errs field.ErrorList
	for _, p := range pe.Problems {
		fld := data
		if o := owners[p.File]; len(o) > 0 && o[len(o)-1] == name {
			fld = data.Key(p.File)
		} else if len(o) > 0 {
			p.Message += fmt.Sprintf(" (in ConfigMap %s)", o[len(o)-1])
		} else if p.File != "" {
			p.Message += " (in a shipped policy, failing with this ConfigMap's modules; to replace a shipped module, replace its _test.rego too)"
		}
		errs = append(errs, field.Invalid(fld, field.OmitValueType{}, p.String()))
	}
	return errs, nil
}

// stepTimeout is a check that ran out of time.
type stepTimeout struct {
	what, faster string
	limit        time.Duration
}

func (e *stepTimeout) Error() string {
	return fmt.Sprintf("%s did not finish within %s (fix: make %s faster)", e.what, e.limit, e.faster)
}

// withTimeout runs check under a timeout; when that runs out and check
// returns none of *PolicyError, *BudgetError and *MemoryBudgetError, the error is a
// *stepTimeout saying what did not finish (and what to make faster).
func withTimeout(ctx context.Context, limit time.Duration, what, faster string, check func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	err := check(ctx)
	var (
		pe *PolicyError
		be *BudgetError
		me *MemoryBudgetError
	)
	if err != nil && ctx.Err() != nil && !errors.As(err, &pe) && !errors.As(err, &be) && !errors.As(err, &me) {
		return &stepTimeout{what: what, faster: faster, limit: limit}
	}
	return err
}

// budgetFieldError is the denial of a policy set that ran over the budget:
// on data[module] when the module is cm's, naming the module, the sample,
// the budget and the fix.
func budgetFieldError(be *BudgetError, cm string, owners map[string][]string) *field.Error {
	fld, where := culprit(be.Module, be.Line, cm, owners, "slow with this ConfigMap's modules")
	return field.Invalid(fld, field.OmitValueType{}, policy.Explain(
		fmt.Sprintf("%s: evaluating the policies on the sample input %s (%s) took longer than the %s budget", where, be.Sample, be.Description, be.Budget),
		policy.RulePolicyBudget,
		fmt.Sprintf("make %s faster, %s; every admission's evaluation is cut off at its deadline and the VM denied", orDefault(be.Module, "the operator modules"), leanerRego)))
}

// memoryFieldError is the denial of a policy set whose test or sample
// evaluation went over PolicyMemoryBudget: on data[module] when the module
// is cm's, naming the module, the test or sample, the budget and the fix.
func memoryFieldError(me *MemoryBudgetError, cm string, owners map[string][]string) *field.Error {
	fld, where := culprit(me.Module, 0, cm, owners, "with this ConfigMap's modules")
	return field.Invalid(fld, field.OmitValueType{}, policy.Explain(
		fmt.Sprintf("%s: %s allocated more than the %s memory budget and was stopped", where, me.what(), mib(me.Budget)),
		policy.RulePolicyMemory,
		fmt.Sprintf("make %s build smaller values, %s; a policy that needs this much memory would take the webhook's memory at admission", orDefault(me.Module, "the operator modules"), leanerRego)))
}

// leanerRego is how a budget denial suggests making Rego cheaper.
const leanerRego = "for example iterate over the VM's own disks or annotations instead of numbers.range or large comprehensions"

// culprit says where a budget denial of the policy ConfigMap cm points and
// how it names module (the one that took the time or memory; "" when none
// was singled out), with line (0: unknown): on data[module] when the module
// is cm's, else on data, naming the ConfigMap it came from or, for a
// shipped module, that it is shipped (shipped says how it went over).
// owners maps modules to the ConfigMaps that define them, the last winning.
func culprit(module string, line int, cm string, owners map[string][]string, shipped string) (*field.Path, string) {
	fld := field.NewPath("data")
	if module == "" {
		return fld, "the policy set"
	}
	where := "module " + module
	if line > 0 {
		where += fmt.Sprintf(" (most of the time at line %d)", line)
	}
	switch o := owners[module]; {
	case len(o) > 0 && o[len(o)-1] == cm:
		fld = fld.Key(module)
	case len(o) > 0:
		where += " in ConfigMap " + o[len(o)-1]
	default:
		where += " (shipped, " + shipped + ")"
	}
	return fld, where
}
