package main

import (
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// TestDemoKubeconfig: the kubeconfig the demo writes, loaded as virtctl
// loads --kubeconfig, gives client-go the bridge over https, the demo CA,
// alice's token and the demo's namespace. The same file with an http://
// server gives no token at all, which is why the demo serves TLS.
func TestDemoKubeconfig(t *testing.T) {
	tests := map[string]struct {
		server    string
		wantToken bool
	}{
		"https sends the token":        {server: "https://127.0.0.1:8090", wantToken: true},
		"plain http drops the token":   {server: "http://127.0.0.1:8090", wantToken: false},
		"https on another port and ip": {server: "https://[::1]:18443", wantToken: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			f := demoFiles{dir: t.TempDir()}
			if err := os.WriteFile(f.token(), []byte("alice-token"), 0o600); err != nil {
				t.Fatal(err)
			}
			if _, _, err := demoTLS(f); err != nil {
				t.Fatal(err)
			}
			if err := writeDemoKubeconfig(tc.server, f); err != nil {
				t.Fatal(err)
			}
			cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
				&clientcmd.ClientConfigLoadingRules{ExplicitPath: f.kubeconfig()}, &clientcmd.ConfigOverrides{})
			cfg, err := cc.ClientConfig()
			if err != nil {
				t.Fatalf("load: %v", err)
			}
			if cfg.Host != tc.server {
				t.Errorf("host %q, want %q", cfg.Host, tc.server)
			}
			if got := cfg.BearerToken == "alice-token"; got != tc.wantToken {
				t.Errorf("bearer token %q, want it sent: %v", cfg.BearerToken, tc.wantToken)
			}
			if tc.wantToken && cfg.CAFile != f.ca() {
				t.Errorf("CA file %q, want %q", cfg.CAFile, f.ca())
			}
			if ns, _, err := cc.Namespace(); err != nil || ns != demoNamespace {
				t.Errorf("namespace %q (%v), want %q", ns, err, demoNamespace)
			}
			st, err := os.Stat(f.kubeconfig())
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("kubeconfig mode %v, want 0600: it names a credential", st.Mode().Perm())
			}
		})
	}
}

// TestDemoTLS: a client that trusts only the ca.crt the demo writes (as
// virtctl does through the kubeconfig) verifies the bridge's certificate
// under each name the demo prints or a user types.
func TestDemoTLS(t *testing.T) {
	f := demoFiles{dir: t.TempDir()}
	serverTLS, _, err := demoTLS(f)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.TLS = serverTLS
	srv.StartTLS()
	defer srv.Close()
	_, port, err := net.SplitHostPort(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		t.Run(host, func(t *testing.T) {
			cfg := &rest.Config{Host: "https://" + net.JoinHostPort(host, port), TLSClientConfig: rest.TLSClientConfig{CAFile: f.ca()}}
			tlsConfig, err := rest.TLSConfigFor(cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConfig}, Timeout: 10 * time.Second}
			resp, err := c.Get(cfg.Host)
			if err != nil {
				t.Fatalf("GET %s trusting only %s: %v", cfg.Host, f.ca(), err)
			}
			_ = resp.Body.Close()
		})
	}
}

func TestDialAddr(t *testing.T) {
	tests := map[string]struct{ listen, want string }{
		"loopback stays":        {"127.0.0.1:8090", "127.0.0.1:8090"},
		"any IPv4 is loopback":  {"0.0.0.0:8090", "127.0.0.1:8090"},
		"any IPv6 is loopback":  {"[::]:8090", "127.0.0.1:8090"},
		"a host address stays":  {"192.0.2.7:443", "192.0.2.7:443"},
		"IPv6 loopback bracket": {"[::1]:8090", "[::1]:8090"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			addr, err := net.ResolveTCPAddr("tcp", tc.listen)
			if err != nil {
				t.Fatal(err)
			}
			if got := dialAddr(addr); got != tc.want {
				t.Errorf("dialAddr(%s) = %q, want %q", tc.listen, got, tc.want)
			}
		})
	}
}
