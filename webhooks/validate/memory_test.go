package validate

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// hogTestSource is issue 27's finding 6: a test that builds a 3-million
// element array, about 330 MiB of heap.
const hogTestSource = `package virtstation.rules.hog

test_range if count(numbers.range(1, 3e6)) > 0
`

// hogRuleSource is a rule that, on every input, builds the array of
// hogTestSource.
const hogRuleSource = `package virtstation.rules.hogrule

deny contains {"id": "hog", "field": "metadata", "message": "never"} if {
	count(numbers.range(1, 3e6)) < 0
}
`

// TestRunTestsWithin: a test that allocates hundreds of MiB is stopped
// near the budget and named with its module; the shipped tests, with an
// operator policy's, pass with an eighth of the budget; failing tests are
// still policy errors.
func TestRunTestsWithin(t *testing.T) {
	cases := map[string]struct {
		operator   []Module
		budget     uint64
		wantModule string
		wantTest   string
		wantFailed string
	}{
		"shipped, an eighth of the budget":         {budget: PolicyMemoryBudget / 8},
		"operator policy, an eighth of the budget": {operator: operatorMaxDisks, budget: PolicyMemoryBudget / 8},
		"numbers.range(1, 3e6)": {
			operator: []Module{{Name: "hog_test.rego", Source: hogTestSource}}, budget: PolicyMemoryBudget,
			wantModule: "hog_test.rego", wantTest: "data.virtstation.rules.hog.test_range",
		},
		"failing test": {
			operator:   []Module{{Name: "x_test.rego", Source: "package virtstation.rules.x\n\ntest_bad if false\n"}},
			budget:     PolicyMemoryBudget,
			wantFailed: "x_test.rego",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			start, before := time.Now(), heapAllocated()
			err := RunTestsWithin(context.Background(), Merge(ShippedModules(), tc.operator), tc.budget)
			t.Logf("%s, %d MiB allocated in all", time.Since(start), (heapAllocated()-before)>>20)
			var me *MemoryBudgetError
			var pe *PolicyError
			switch {
			case tc.wantModule != "":
				if !errors.As(err, &me) {
					t.Fatalf("err = %v, want a memory budget error", err)
				}
				if me.Module != tc.wantModule || me.Test != tc.wantTest || me.Budget != tc.budget {
					t.Errorf("error %+v, want module %s, test %s", me, tc.wantModule, tc.wantTest)
				}
				// Stopped near the budget, not after the 330 MiB.
				if me.Allocated > 2*tc.budget {
					t.Errorf("stopped at %d MiB, want near the %d MiB budget", me.Allocated>>20, tc.budget>>20)
				}
				for _, w := range []string{tc.wantTest, "64 MiB memory budget", "in module " + tc.wantModule} {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
			case tc.wantFailed != "":
				if !errors.As(err, &pe) || len(pe.Files()) != 1 || pe.Files()[0] != tc.wantFailed {
					t.Fatalf("err = %v, want a failed test in %s", err, tc.wantFailed)
				}
			case err != nil:
				t.Fatalf("err = %v", err)
			}
		})
	}
}

// TestCheckBudgetMemory: an evaluation on the samples that allocates over
// the memory budget is refused, naming the module, even with a minute of
// time budget; the shipped set's evaluations stay within an eighth of it.
func TestCheckBudgetMemory(t *testing.T) {
	ctx := context.Background()
	modules := Merge(ShippedModules(), []Module{{Name: "hogrule.rego", Source: hogRuleSource}})
	compiler, err := Compile(modules)
	if err != nil {
		t.Fatal(err)
	}
	err = checkBudget(ctx, compiler, modules, Samples(), time.Minute)
	var me *MemoryBudgetError
	if !errors.As(err, &me) || me.Module != "hogrule.rego" || me.Sample == "" || me.Test != "" {
		t.Fatalf("err = %v (%+v), want a memory budget error in hogrule.rego on a sample", err, me)
	}

	shipped := ShippedModules()
	compiler, err = Compile(shipped)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkBudgets(ctx, compiler, shipped, Samples(), PolicyBudget, PolicyMemoryBudget/8); err != nil {
		t.Errorf("shipped set, an eighth of the memory budget: %v", err)
	}
}
