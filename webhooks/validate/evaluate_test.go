package validate

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/virtstation/virtstation/policy"
)

func TestEvaluateDeadline(t *testing.T) {
	slow := Module{Name: "slow.rego", Source: "package virtstation.rules.slow\n\ndeny contains \"never\" if {\n\tinput.slow\n\tsome i in numbers.range(1, 5000)\n\tsome j in numbers.range(1, 5000)\n\ti * j < 0\n}\n"}
	e := NewEngine(20 * time.Millisecond)
	if _, err := e.Load(context.Background(), Merge(ShippedModules(), []Module{slow})); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err := e.Evaluate(context.Background(), map[string]any{"slow": true, "dataDisks": []any{}})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want a deadline", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("evaluation took %s after a 20ms deadline", d)
	}
}

func TestEvaluateReadsLooseViolations(t *testing.T) {
	loose := Module{Name: "loose.rego", Source: "package virtstation.rules.loose\n\ndeny contains \"plain message\" if input.name == \"x\"\n\ndeny contains {\"message\": \"no id\", \"field\": 3} if input.name == \"x\"\n"}
	e := NewEngine(0)
	if _, err := e.Load(context.Background(), Merge(ShippedModules(), []Module{loose})); err != nil {
		t.Fatal(err)
	}
	d, err := e.Evaluate(context.Background(), map[string]any{"name": "x", "dataDisks": []any{}})
	if err != nil {
		t.Fatal(err)
	}
	want := []policy.Violation{{ID: "policy", Message: "plain message"}, {ID: "policy", Field: "3", Message: "no id"}}
	if !slices.Equal(d.Deny, want) {
		t.Errorf("deny = %v, want %v", d.Deny, want)
	}
}
