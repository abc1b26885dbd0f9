package auth

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// OriginPolicy decides which web origins may open sessions. Requests without
// an Origin header (CLIs, KubeVirt tooling) are not from a browser page and
// pass; a browser always sends one on a WebSocket handshake.
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
		u, err := url.Parse(o)
		if err != nil || u.Scheme == "" || u.Host == "" || (u.Path != "" && u.Path != "/") {
			return OriginPolicy{}, fmt.Errorf("allowed origin %q: want scheme://host[:port]", o)
		}
		p.allowed[strings.ToLower(u.Scheme+"://"+u.Host)] = true
	}
	return p, nil
}

// Check returns an error naming the origin when r may not proceed.
func (p OriginPolicy) Check(r *http.Request) error {
	origin := r.Header.Get("Origin")
	if origin == "" || p.any {
		return nil
	}
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" {
		return fmt.Errorf("origin %q is not a URL", origin)
	}
	if strings.EqualFold(u.Host, r.Host) || p.allowed[strings.ToLower(u.Scheme+"://"+u.Host)] {
		return nil
	}
	return fmt.Errorf("origin %s is not allowed; add it to the bridge's --allowed-origins", origin)
}
