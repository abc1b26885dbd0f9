package auth

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// OriginPolicy decides which web origins may open sessions. Requests without
// an Origin header (CLIs, KubeVirt tooling) are not from a browser page and
// pass; a browser always sends one on a WebSocket handshake.
//
// An origin is a scheme, a host and a port (RFC 6454): a page served over
// http is another origin than the same host over https, and may not open
// sessions on the https bridge. The bridge's own origin is the scheme it
// was reached with (https when the connection is TLS, else http) and the
// request's Host. Forwarded headers (X-Forwarded-Proto, Forwarded) are not
// trusted: behind a proxy that terminates TLS, the bridge sees http and the
// proxy's Host, so the operator lists the public origin (for example
// https://bridge.example.com) in the allowlist.
type OriginPolicy struct {
	allowed map[string]bool
	any     bool
}

// NewOriginPolicy allows same-origin requests plus the listed origins
// ("https://console.example.com"); "*" allows every origin.
func NewOriginPolicy(allowed []string) (OriginPolicy, error) {
	p := OriginPolicy{allowed: map[string]bool{}}
	for _, o := range allowed {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if o == "*" {
			p.any = true
			continue
		}
		// An operator may write the origin with a trailing slash, as a
		// browser's address bar shows it.
		norm, err := parseOrigin(strings.TrimSuffix(o, "/"))
		if err != nil {
			return OriginPolicy{}, fmt.Errorf("allowed origin %q: %w", o, err)
		}
		p.allowed[norm] = true
	}
	return p, nil
}

// Check returns an error naming the origin when r may not proceed.
func (p OriginPolicy) Check(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" || p.any {
		return nil
	}
	got, err := parseOrigin(origin)
	if err != nil {
		return fmt.Errorf("origin %q is not a URL", origin)
	}
	own := requestOrigin(r)
	if got == own || p.allowed[got] {
		return nil
	}
	if own != "" && hostPart(got) == hostPart(own) {
		// Same host, other scheme: a page over http against an https
		// bridge, or an https page in front of a proxy that terminates TLS.
		return fmt.Errorf("origin %s is not allowed: the bridge was reached over %s; add it to the bridge's --allowed-origins", origin, schemeOf(r))
	}
	return fmt.Errorf("origin %s is not allowed; add it to the bridge's --allowed-origins", origin)
}

// requestOrigin is the origin r was sent to: the scheme of the connection
// and the Host header, normalized; "" when the Host is not a host[:port].
func requestOrigin(r *http.Request) string {
	own, err := parseOrigin(schemeOf(r) + "://" + r.Host)
	if err != nil {
		return ""
	}
	return own
}

// hostPart is the host[:port] of a normalized origin.
func hostPart(origin string) string {
	_, host, _ := strings.Cut(origin, "://")
	return host
}

// schemeOf is the scheme r was sent with, from the connection alone.
func schemeOf(r *http.Request) string {
	if r.TLS != nil {
		return "https"
	}
	return "http"
}

// defaultPorts are the ports a serialized origin leaves out.
var defaultPorts = map[string]string{"http": "80", "https": "443", "ws": "80", "wss": "443"}

// parseOrigin parses a serialized web origin, scheme://host[:port] as a
// browser sends it in the Origin header, and returns it normalized: scheme
// and host lower-cased, the scheme's default port left out. Anything else
// (a path, a query, user info, "null") is an error.
func parseOrigin(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("want scheme://host[:port]: %w", err)
	}
	// A browser sends host names in ASCII (IDNs as punycode), without
	// escapes; rejecting "%" keeps every accepted origin's form canonical.
	if u.Scheme == "" || u.Host == "" || u.Opaque != "" || u.User != nil || u.Path != "" ||
		u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(s, "#%") {
		return "", fmt.Errorf("want scheme://host[:port], got %q", s)
	}
	scheme := strings.ToLower(u.Scheme)
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if host == "" || strings.HasSuffix(u.Host, ":") {
		return "", fmt.Errorf("want scheme://host[:port], got %q", s)
	}
	if port == "" || port == defaultPorts[scheme] {
		if strings.Contains(host, ":") {
			host = "[" + host + "]" // IPv6
		}
		return scheme + "://" + host, nil
	}
	return scheme + "://" + net.JoinHostPort(host, port), nil
}
