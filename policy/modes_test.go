package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestParseModes(t *testing.T) {
	cases := map[string]struct {
		data    map[string]string
		want    Modes
		wantErr []string
	}{
		"empty":         {data: nil, want: Modes{}},
		"all three":     {data: map[string]string{"mount-path": "warn", "disk-claim": "deny", "shared-memory": " dryrun\n"}, want: Modes{"mount-path": ModeWarn, "disk-claim": ModeDeny, "shared-memory": ModeDryRun}},
		"operator rule": {data: map[string]string{"max-disks": "warn"}, want: Modes{"max-disks": ModeWarn}},
		"bad values": {
			data:    map[string]string{"mount-path": "block", "disk-claim": "Warn", "shared-memory": "deny"},
			wantErr: []string{`data[disk-claim]: Unsupported value: "Warn"`, `data[mount-path]: Unsupported value: "block"`, `"deny", "dryrun", "warn"`},
		},
		"empty value": {
			data:    map[string]string{"mount-path": ""},
			wantErr: []string{`data[mount-path]: Unsupported value: ""`},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ParseModes(tc.data)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("modes %v, want an error", got)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q lacks %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != tc.want.String() || len(got) != len(tc.want) {
				t.Errorf("modes %v, want %v", got, tc.want)
			}
		})
	}
}

func TestModesApply(t *testing.T) {
	mp := Violation{ID: "mount-path", Field: "f1", Message: "m1"}
	dc := Violation{ID: "disk-claim", Field: "f2", Message: "m2"}
	sm := Violation{ID: "shared-memory", Field: "f3", Message: "m3"}
	op := Violation{ID: "max-disks", Field: "f4", Message: "m4"}
	advice := Violation{ID: "advice", Field: "f5", Message: "m5"}
	d := Decision{Deny: []Violation{dc, op, mp, sm}, Warn: []Violation{advice}}
	cases := map[string]struct {
		modes                Modes
		deny, warn, observed []Violation
	}{
		"default denies": {modes: nil, deny: []Violation{dc, op, mp, sm}, warn: []Violation{advice}},
		"per rule": {
			modes: Modes{"mount-path": ModeWarn, "shared-memory": ModeDryRun, "disk-claim": ModeDeny, "unknown": ModeWarn},
			deny:  []Violation{dc, op}, warn: []Violation{advice, mp}, observed: []Violation{sm},
		},
		"warn set ignores modes": {
			modes: Modes{"advice": ModeDryRun, "max-disks": ModeDryRun},
			deny:  []Violation{dc, mp, sm}, warn: []Violation{advice}, observed: []Violation{op},
		},
		"unknown mode denies": {modes: Modes{"mount-path": "block"}, deny: []Violation{dc, op, mp, sm}, warn: []Violation{advice}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			deny, warn, observed := tc.modes.Apply(d)
			if !slices.Equal(deny, tc.deny) || !slices.Equal(warn, tc.warn) || !slices.Equal(observed, tc.observed) {
				t.Errorf("Apply = %v / %v / %v, want %v / %v / %v", deny, warn, observed, tc.deny, tc.warn, tc.observed)
			}
		})
	}
}

func TestModesString(t *testing.T) {
	if s := (Modes{}).String(); s != "all rules deny" {
		t.Errorf("empty: %q", s)
	}
	if s := (Modes{"b": ModeWarn, "a": ModeDryRun}).String(); s != "a=dryrun, b=warn" {
		t.Errorf("String() = %q", s)
	}
	if m := (Modes(nil)).Mode("x"); m != ModeDeny {
		t.Errorf("nil Modes: %q", m)
	}
}

// The loader refuses a mode on a Go check that always denies, as the
// webhook does: such a ConfigMap applied without the policy label, which
// the webhook never sees, does not load either.
func TestParseModesRefusesGoRules(t *testing.T) {
	if _, err := ParseModes(map[string]string{"data-disks": "warn"}); err == nil || !strings.Contains(err.Error(), "data[data-disks]: Forbidden") {
		t.Errorf("ParseModes(data-disks: warn) = %v, want a refusal on data[data-disks]", err)
	}
}
