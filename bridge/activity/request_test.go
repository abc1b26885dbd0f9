package activity

import (
	"strings"
	"testing"
	"time"

	"github.com/virtstation/virtstation/api"
)

func TestParseKeepRunning(t *testing.T) {
	for name, tc := range map[string]struct {
		body    string
		want    time.Duration
		wantErr string
	}{
		"no body":             {body: "", want: api.DefaultMaxKeepRunning},
		"whitespace":          {body: " \n", want: api.DefaultMaxKeepRunning},
		"empty object":        {body: "{}", want: api.DefaultMaxKeepRunning},
		"two hours":           {body: `{"duration":"2h"}`, want: 2 * time.Hour},
		"at the bound":        {body: `{"duration":"720h"}`, want: api.MaxLifecycleDuration},
		"over the bound":      {body: `{"duration":"721h"}`, wantErr: "at most"},
		"zero":                {body: `{"duration":"0s"}`, wantErr: "greater than zero"},
		"negative":            {body: `{"duration":"-1h"}`, wantErr: "greater than zero"},
		"not a duration":      {body: `{"duration":"2 days"}`, wantErr: "not a Go duration"},
		"a number":            {body: `{"duration":7200}`, wantErr: "not a JSON object"},
		"unknown field":       {body: `{"duration":"2h","until":"tomorrow"}`, wantErr: "not a JSON object"},
		"not JSON":            {body: `duration=2h`, wantErr: "not a JSON object"},
		"two objects":         {body: `{"duration":"2h"}{"duration":"3h"}`, wantErr: "more than one"},
		"trailing brace":      {body: `{"duration":"2h"}}`, wantErr: "more than one"},
		"too large":           {body: `{"duration":"` + strings.Repeat("1", MaxRequestBytes) + `h"}`, wantErr: "larger than"},
		"overflowing numbers": {body: `{"duration":"9999999999999h"}`, wantErr: "not a Go duration"},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := ParseKeepRunning([]byte(tc.body))
			switch {
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("ParseKeepRunning = %v, %v; want an error saying %q", got, err, tc.wantErr)
			case tc.wantErr == "" && (err != nil || got != tc.want):
				t.Fatalf("ParseKeepRunning = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

// FuzzParseKeepRunning: any body gives a duration within the bounds or an
// error, never a panic.
func FuzzParseKeepRunning(f *testing.F) {
	for _, s := range []string{"", "{}", `{"duration":"2h"}`, `{"duration":"-1s"}`, `{"duration":"1e3h"}`, `null`, `[]`, `{"duration":null}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := ParseKeepRunning(body)
		if err == nil && (d <= 0 || d > api.MaxLifecycleDuration) {
			t.Fatalf("ParseKeepRunning(%q) = %v, out of bounds", body, d)
		}
	})
}
