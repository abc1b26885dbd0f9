package webhooks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testCA is a CA that issues client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a client certificate named cn, with dnsNames.
func (ca *testCA) issue(t *testing.T, cn string, dnsNames ...string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn}, DNSNames: dnsNames,
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// TestClientCertificates runs the webhook server with a client CA and
// checks who gets an answer: only callers with a certificate from the CA
// (and, with ClientNames, of an allowed name); the others fail the TLS
// handshake before any request is read.
func TestClientCertificates(t *testing.T) {
	apiCA, otherCA := newTestCA(t, "api-server-webhook-ca"), newTestCA(t, "someone-else")
	apiServer := apiCA.issue(t, "kube-apiserver-webhook-client")
	otherName := apiCA.issue(t, "another-client")
	byDNS := apiCA.issue(t, "x", "kube-apiserver-webhook-client")
	forged := otherCA.issue(t, "kube-apiserver-webhook-client")

	cases := map[string]struct {
		names []string
		cert  *tls.Certificate
		ok    bool
	}{
		"no certificate":                 {cert: nil},
		"certificate from another CA":    {cert: &forged},
		"certificate from the CA":        {cert: &apiServer, ok: true},
		"any name from the CA":           {cert: &otherName, ok: true},
		"allowed name":                   {names: []string{"kube-apiserver-webhook-client"}, cert: &apiServer, ok: true},
		"allowed DNS name":               {names: []string{"kube-apiserver-webhook-client"}, cert: &byDNS, ok: true},
		"other name from the CA":         {names: []string{"kube-apiserver-webhook-client"}, cert: &otherName},
		"allowed name from another CA":   {names: []string{"kube-apiserver-webhook-client"}, cert: &forged},
		"no certificate, names required": {names: []string{"kube-apiserver-webhook-client"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeCert(t, dir, 1)
			caFile := filepath.Join(dir, "client-ca.crt")
			writeFile(t, caFile, apiCA.pem)
			addr := startServer(t, dir, caFile, tc.names)

			status, err := get(addr, tc.cert)
			if tc.ok && (err != nil || status != http.StatusOK) {
				t.Fatalf("status %d, %v; want 200", status, err)
			}
			if !tc.ok && err == nil {
				t.Fatalf("status %d; want the TLS handshake refused", status)
			}
		})
	}
}

// TestReadinessWithClientCA: the webhook-server readiness check (which
// dials without a client certificate) still passes when client
// certificates are required, or no replica would ever become ready.
func TestReadinessWithClientCA(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir, 1)
	caFile := filepath.Join(dir, "client-ca.crt")
	writeFile(t, caFile, newTestCA(t, "ca").pem)
	ca, err := LoadClientCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	srv := NewServer(ServerOptions{Host: "127.0.0.1", Port: port, CertDir: dir, ClientCA: ca})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	check := srv.StartedChecker()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := check(nil)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("readiness: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClientCAReload: a CA file replaced in place (a rotated Secret) is
// used for new connections without a restart; a broken file keeps the last
// good CA.
func TestClientCAReload(t *testing.T) {
	oldCA, newCA := newTestCA(t, "old"), newTestCA(t, "new")
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	writeFile(t, caFile, oldCA.pem)
	ca, err := LoadClientCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca.now = func() time.Time { return now }
	verifies := func(issuer *testCA) bool {
		leaf, err := x509.ParseCertificate(issuer.issue(t, "c").Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: ca.current(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		return err == nil
	}

	steps := []struct {
		name     string
		write    []byte
		advance  time.Duration
		old, new bool
	}{
		{name: "loaded", old: true},
		{name: "rotated, not yet re-read", write: newCA.pem, advance: clientCARecheck / 2, old: true},
		{name: "rotated, re-read", advance: clientCARecheck, new: true},
		{name: "half-written file keeps the last good CA", write: []byte("-----BEGIN CERT"), advance: clientCARecheck, new: true},
		{name: "both CAs during a rollover", write: append(append([]byte{}, oldCA.pem...), newCA.pem...), advance: clientCARecheck, old: true, new: true},
	}
	for _, s := range steps {
		if s.write != nil {
			writeFile(t, caFile, s.write)
		}
		now = now.Add(s.advance)
		if got := verifies(oldCA); got != s.old {
			t.Errorf("%s: old CA verifies = %v, want %v", s.name, got, s.old)
		}
		if got := verifies(newCA); got != s.new {
			t.Errorf("%s: new CA verifies = %v, want %v", s.name, got, s.new)
		}
	}
}

func TestLoadClientCARefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]struct {
		content []byte
		want    string
	}{
		"missing":         {want: "no such file"},
		"empty":           {content: []byte{}, want: "no PEM certificate"},
		"a key, not a CA": {content: []byte("-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"), want: "no PEM certificate"},
		"not PEM":         {content: []byte("hello"), want: "no PEM certificate"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(name, " ", "-"))
			if tc.content != nil {
				writeFile(t, path, tc.content)
			}
			_, err := LoadClientCA(path)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("LoadClientCA: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// startServer starts NewServer with one handler answering 200 on /ok.
func startServer(t *testing.T, certDir, caFile string, names []string) string {
	t.Helper()
	ca, err := LoadClientCA(caFile)
	if err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	srv := NewServer(ServerOptions{Host: "127.0.0.1", Port: port, CertDir: certDir, ClientCA: ca, ClientNames: names})
	srv.Register("/ok", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") }))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			_ = conn.Close() // only waiting for the listener
			return addr
		}
		if time.Now().After(deadline) {
			t.Fatalf("webhook server not listening: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// get sends GET /ok to addr over a fresh connection, presenting cert when
// not nil.
func get(addr string, cert *tls.Certificate) (int, error) {
	cfg := &tls.Config{InsecureSkipVerify: true} //nolint:gosec // the server's certificate is not under test
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	resp, err := c.Get("https://" + addr + "/ok")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }() // status is all that matters
	return resp.StatusCode, nil
}
