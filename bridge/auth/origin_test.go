package auth

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestOriginPolicy(t *testing.T) {
	cases := map[string]struct {
		allowed []string
		host    string
		tls     bool // the request came over TLS (an https bridge)
		origin  string
		wantErr string
	}{
		"no origin (CLI)":                 {host: "bridge.example.com", tls: true},
		"same origin, https":              {host: "bridge.example.com", tls: true, origin: "https://bridge.example.com"},
		"same origin, http":               {host: "bridge.example.com", origin: "http://bridge.example.com"},
		"same origin with port":           {host: "bridge.example.com:8443", tls: true, origin: "https://bridge.example.com:8443"},
		"same origin, case differs":       {host: "Bridge.Example.com", tls: true, origin: "HTTPS://bridge.EXAMPLE.com"},
		"same origin, default port named": {host: "bridge.example.com:443", tls: true, origin: "https://bridge.example.com"},
		"same origin, IPv6":               {host: "[::1]:8443", tls: true, origin: "https://[::1]:8443"},
		"http page against https bridge": {host: "bridge.example.com", tls: true, origin: "http://bridge.example.com",
			wantErr: "origin http://bridge.example.com is not allowed: the bridge was reached over https; add it to the bridge's --allowed-origins"},
		"https page behind a TLS-terminating proxy": {host: "bridge.example.com", origin: "https://bridge.example.com",
			wantErr: "the bridge was reached over http; add it to the bridge's --allowed-origins"},
		"https page behind a proxy, public origin listed": {allowed: []string{"https://bridge.example.com"},
			host: "virtstation-bridge.virtstation-system.svc", origin: "https://bridge.example.com"},
		"other site":                {host: "bridge.example.com", tls: true, origin: "https://evil.example", wantErr: "origin https://evil.example is not allowed; add it to the bridge's --allowed-origins"},
		"port differs":              {host: "bridge.example.com", tls: true, origin: "https://bridge.example.com:444", wantErr: "not allowed"},
		"host is a suffix":          {host: "example.com", tls: true, origin: "https://evil-example.com", wantErr: "not allowed"},
		"allowlisted":               {allowed: []string{"https://kubevirt-manager.example"}, host: "bridge", origin: "https://kubevirt-manager.example"},
		"allowlisted, trailing /":   {allowed: []string{"https://kubevirt-manager.example/"}, host: "bridge", origin: "https://kubevirt-manager.example"},
		"allowlisted, default port": {allowed: []string{"https://kubevirt-manager.example:443"}, host: "bridge", origin: "https://kubevirt-manager.example"},
		"allowlisted with port":     {allowed: []string{"http://localhost:8080"}, host: "bridge", tls: true, origin: "http://localhost:8080"},
		"allowlisted, other scheme": {allowed: []string{"https://kubevirt-manager.example"}, host: "bridge", origin: "http://kubevirt-manager.example", wantErr: "not allowed"},
		"allowlisted, other port":   {allowed: []string{"https://kubevirt-manager.example"}, host: "bridge", origin: "https://kubevirt-manager.example:8443", wantErr: "not allowed"},
		"wildcard":                  {allowed: []string{"*"}, host: "bridge", origin: "https://anything.example"},
		"origin null":               {host: "bridge", origin: "null", wantErr: "not a URL"},
		"origin with a path":        {host: "bridge", origin: "http://bridge/x", wantErr: "not a URL"},
		"origin with user info":     {host: "bridge", origin: "http://bridge@evil.example", wantErr: "not a URL"},
		"request without a host":    {host: "", origin: "http://bridge", wantErr: "not allowed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := NewOriginPolicy(tc.allowed)
			if err != nil {
				t.Fatal(err)
			}
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.Host = tc.host
			r.TLS = nil
			if tc.tls {
				r.TLS = &tls.ConnectionState{}
			}
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

func TestNewOriginPolicyRejectsNonOrigins(t *testing.T) {
	for _, bad := range []string{
		"kubevirt-manager.example", "https://x.example/app", "://", "https://", "https://x.example:",
		"https://user@x.example", "https://x.example?q", "https://x.example#f", "https://x%2Eexample", "https://x.example:port",
	} {
		if _, err := NewOriginPolicy([]string{bad}); err == nil {
			t.Errorf("NewOriginPolicy(%q) accepted it", bad)
		}
	}
}

func TestParseOrigin(t *testing.T) {
	cases := map[string]string{
		"https://bridge.example.com":     "https://bridge.example.com",
		"HTTPS://Bridge.Example.COM":     "https://bridge.example.com",
		"https://bridge.example.com:443": "https://bridge.example.com",
		"http://bridge.example.com:80":   "http://bridge.example.com",
		"http://bridge.example.com:443":  "http://bridge.example.com:443",
		"https://[::1]":                  "https://[::1]",
		"https://[::1]:443":              "https://[::1]",
		"https://[::1]:8443":             "https://[::1]:8443",
		"chrome-extension://abcdef":      "chrome-extension://abcdef",
	}
	for in, want := range cases {
		if got, err := parseOrigin(in); err != nil || got != want {
			t.Errorf("parseOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// FuzzOriginPolicy checks that parseOrigin's normal form is a fixed point,
// and that Check, with no allowlist, lets through only an origin of the
// request's own scheme and Host.
func FuzzOriginPolicy(f *testing.F) {
	for _, s := range []string{
		"https://bridge.example.com", "http://bridge.example.com:8080", "https://[::1]:8443", "null",
		"https://a@b", "HTTPS://X:443", "https://x/", "https://x:", "https://[fe80::1%25eth0]", "ws://x:80",
	} {
		f.Add(s, "bridge.example.com", true)
		f.Add(s, "x:443", false)
	}
	f.Fuzz(func(t *testing.T, origin, host string, overTLS bool) {
		if n, err := parseOrigin(origin); err == nil {
			if again, err := parseOrigin(n); err != nil || again != n {
				t.Fatalf("parseOrigin(%q) = %q, which parses to %q, %v", origin, n, again, err)
			}
		}
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Host, r.TLS = host, nil
		scheme := "http"
		if overTLS {
			r.TLS, scheme = &tls.ConnectionState{}, "https"
		}
		r.Header.Set("Origin", origin)
		if (OriginPolicy{}).Check(r) != nil || r.Header.Get("Origin") == "" {
			return
		}
		got, err := parseOrigin(origin)
		if err != nil {
			t.Fatalf("Check accepted origin %q, which does not parse: %v", origin, err)
		}
		own, err := parseOrigin(scheme + "://" + host)
		if err != nil || got != own {
			t.Fatalf("Check accepted origin %q (%s) for a request to %s://%s (%q, %v)", origin, got, scheme, host, own, err)
		}
		if !strings.HasPrefix(got, scheme+"://") {
			t.Fatalf("Check accepted origin %q for a request over %s", origin, scheme)
		}
	})
}
