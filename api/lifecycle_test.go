package api

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestParseLifecycle(t *testing.T) {
	defaults := LifecycleDefaults{Mode: ModeObserve, IdleTimeout: 2 * time.Hour, IdleGracePeriod: DefaultIdleGracePeriod, MaxKeepRunning: DefaultMaxKeepRunning}
	tests := []struct {
		name    string
		ann     map[string]string
		want    LifecyclePolicy
		wantErr string
	}{
		{"namespace defaults", nil, LifecyclePolicy{Mode: ModeObserve, IdleTimeout: 2 * time.Hour, IdleGracePeriod: 15 * time.Minute, MaxKeepRunning: 8 * time.Hour}, ""},
		{"annotations override", map[string]string{AnnotationIdleTimeout: "30m", AnnotationIdleGracePeriod: "0s", AnnotationMaxKeepRunning: "1h", AnnotationIdleStopUnsafe: "true"},
			LifecyclePolicy{Mode: ModeObserve, IdleTimeout: 30 * time.Minute, MaxKeepRunning: time.Hour, StopUnsafe: true}, ""},
		{"zero idle timeout", map[string]string{AnnotationIdleTimeout: "0s"}, LifecyclePolicy{Mode: ModeObserve, IdleTimeout: 2 * time.Hour, IdleGracePeriod: 15 * time.Minute, MaxKeepRunning: 8 * time.Hour}, "must be greater than zero"},
		{"over 30 days", map[string]string{AnnotationMaxKeepRunning: "721h"}, LifecyclePolicy{Mode: ModeObserve, IdleTimeout: 2 * time.Hour, IdleGracePeriod: 15 * time.Minute, MaxKeepRunning: 8 * time.Hour}, "at most 720h0m0s"},
		{"bad lease time", map[string]string{AnnotationKeepRunningUntil: "tomorrow"}, LifecyclePolicy{Mode: ModeObserve, IdleTimeout: 2 * time.Hour, IdleGracePeriod: 15 * time.Minute, MaxKeepRunning: 8 * time.Hour}, "RFC 3339"},
		{"bad opt-in", map[string]string{AnnotationIdleStopUnsafe: "yes"}, LifecyclePolicy{Mode: ModeObserve, IdleTimeout: 2 * time.Hour, IdleGracePeriod: 15 * time.Minute, MaxKeepRunning: 8 * time.Hour}, "supported values"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := ParseLifecycle(tt.ann, defaults, field.NewPath("metadata", "annotations"))
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("policy = %+v, want %+v", got, tt.want)
			}
			switch msg := errs.ToAggregate(); {
			case tt.wantErr == "" && msg != nil:
				t.Errorf("errors %v", msg)
			case tt.wantErr != "" && (msg == nil || !strings.Contains(msg.Error(), tt.wantErr)):
				t.Errorf("errors %v, want one with %q", msg, tt.wantErr)
			}
		})
	}
}

func TestParseLifecycleDefaults(t *testing.T) {
	d, errs := ParseLifecycleDefaults(map[string]string{LifecycleKeyMode: ModeObserve, LifecycleKeyIdleTimeout: "4h", "idle-timout": "1h"}, field.NewPath("data"))
	if d.Mode != ModeObserve || d.IdleTimeout != 4*time.Hour || d.IdleGracePeriod != DefaultIdleGracePeriod {
		t.Errorf("defaults = %+v", d)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "idle-timout") {
		t.Errorf("a misspelt key must be an error naming it: %v", errs)
	}
}

func TestEffectiveKeepRunning(t *testing.T) {
	t0 := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	if got := EffectiveKeepRunning(t0.Add(24*time.Hour), t0, 8*time.Hour); !got.Equal(t0.Add(8 * time.Hour)) {
		t.Errorf("a day's lease capped at 8h gives %s", got)
	}
	if got := EffectiveKeepRunning(t0.Add(time.Hour), t0, 8*time.Hour); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("an hour's lease gives %s", got)
	}
}

// TestLayerLifecycleDefaults: the namespace's ConfigMap over the install
// namespace's over the built-in defaults; a ConfigMap that does not parse
// keeps what did and is named; a read fault stops the layering.
func TestLayerLifecycleDefaults(t *testing.T) {
	builtIn, _ := ParseLifecycleDefaults(nil, nil)
	errRead := errors.New("cache down")
	tests := map[string]struct {
		install, namespace string
		data               map[string]map[string]string
		readErr            map[string]error
		want               LifecycleDefaults
		wantInvalid        string
		wantErr            error
	}{
		"none": {install: "vs", namespace: "team-a", want: builtIn},
		"the cluster's": {install: "vs", namespace: "team-a",
			data: map[string]map[string]string{"vs": {LifecycleKeyMaxKeepRunning: "2h", LifecycleKeyIdleTimeout: "1h"}},
			want: LifecycleDefaults{Mode: ModeEnforce, IdleTimeout: time.Hour, IdleGracePeriod: DefaultIdleGracePeriod, MaxKeepRunning: 2 * time.Hour}},
		"the namespace's over the cluster's": {install: "vs", namespace: "team-a",
			data: map[string]map[string]string{"vs": {LifecycleKeyMaxKeepRunning: "2h", LifecycleKeyIdleTimeout: "1h"}, "team-a": {LifecycleKeyMaxKeepRunning: "30m"}},
			want: LifecycleDefaults{Mode: ModeEnforce, IdleTimeout: time.Hour, IdleGracePeriod: DefaultIdleGracePeriod, MaxKeepRunning: 30 * time.Minute}},
		"no install namespace": {namespace: "team-a",
			data: map[string]map[string]string{"": {LifecycleKeyMaxKeepRunning: "2h"}, "team-a": {LifecycleKeyIdleTimeout: "1h"}},
			want: LifecycleDefaults{Mode: ModeEnforce, IdleTimeout: time.Hour, IdleGracePeriod: DefaultIdleGracePeriod, MaxKeepRunning: DefaultMaxKeepRunning}},
		"the install namespace once": {install: "vs", namespace: "vs",
			data: map[string]map[string]string{"vs": {LifecycleKeyMaxKeepRunning: "bad"}},
			want: builtIn, wantInvalid: "ConfigMap vs/virtstation-lifecycle: data[max-keep-running]: Invalid value: \"bad\""},
		"a namespace's that does not parse keeps what did": {install: "vs", namespace: "team-a",
			data:        map[string]map[string]string{"vs": {LifecycleKeyMaxKeepRunning: "2h"}, "team-a": {LifecycleKeyMaxKeepRunning: "forever", LifecycleKeyIdleTimeout: "1h"}},
			want:        LifecycleDefaults{Mode: ModeEnforce, IdleTimeout: time.Hour, IdleGracePeriod: DefaultIdleGracePeriod, MaxKeepRunning: 2 * time.Hour},
			wantInvalid: "ConfigMap team-a/virtstation-lifecycle: data[max-keep-running]"},
		"a read fault": {install: "vs", namespace: "team-a",
			data:    map[string]map[string]string{"vs": {LifecycleKeyMaxKeepRunning: "2h"}},
			readErr: map[string]error{"team-a": errRead},
			want:    LifecycleDefaults{Mode: ModeEnforce, IdleGracePeriod: DefaultIdleGracePeriod, MaxKeepRunning: 2 * time.Hour}, wantErr: errRead},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			reads := map[string]int{}
			got, invalid, err := LayerLifecycleDefaults(tc.install, tc.namespace, func(ns string) (map[string]string, bool, error) {
				reads[ns]++
				if err := tc.readErr[ns]; err != nil {
					return nil, false, err
				}
				d, ok := tc.data[ns]
				return d, ok, nil
			})
			if got != tc.want {
				t.Errorf("defaults %+v, want %+v", got, tc.want)
			}
			if (invalid == nil) != (tc.wantInvalid == "") || invalid != nil && !strings.Contains(invalid.Error(), tc.wantInvalid) {
				t.Errorf("invalid %v, want %q", invalid, tc.wantInvalid)
			}
			if !errors.Is(err, tc.wantErr) || (err == nil) != (tc.wantErr == nil) {
				t.Errorf("err %v, want %v", err, tc.wantErr)
			}
			for ns, n := range reads {
				if n > 1 || ns == "" {
					t.Errorf("read %q %d times", ns, n)
				}
			}
		})
	}
}
