package auth

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestOriginPolicy(t *testing.T) {
	cases := map[string]struct {
		allowed []string
		host    string
		origin  string
		wantErr string
	}{
		"no origin (CLI)":           {host: "bridge.example.com"},
		"same origin":               {host: "bridge.example.com", origin: "https://bridge.example.com"},
		"same origin with port":     {host: "bridge.example.com:8443", origin: "https://bridge.example.com:8443"},
		"other site":                {host: "bridge.example.com", origin: "https://evil.example", wantErr: "origin https://evil.example is not allowed"},
		"port differs":              {host: "bridge.example.com", origin: "https://bridge.example.com:444", wantErr: "not allowed"},
		"allowlisted":               {allowed: []string{"https://kubevirt-manager.example"}, host: "bridge", origin: "https://kubevirt-manager.example"},
		"allowlisted, other scheme": {allowed: []string{"https://kubevirt-manager.example"}, host: "bridge", origin: "http://kubevirt-manager.example", wantErr: "not allowed"},
		"wildcard":                  {allowed: []string{"*"}, host: "bridge", origin: "https://anything.example"},
		"origin null":               {host: "bridge", origin: "null", wantErr: "not a URL"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := NewOriginPolicy(tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Host = tc.host
			if tc.origin != "" {
				r.Header.Set("Origin", tc.origin)
			}
			err = p.Check(r)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Check = %v, want error containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestNewOriginPolicyRejectsPaths(t *testing.T) {
	for _, bad := range []string{"kubevirt-manager.example", "https://x.example/app", "://"} {
		if _, err := NewOriginPolicy([]string{bad}); err == nil {
			t.Errorf("NewOriginPolicy(%q) accepted it", bad)
		}
	}
}
