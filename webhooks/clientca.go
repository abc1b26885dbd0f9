package webhooks

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// clientCARecheck is how often, at most, the client CA file is re-read: on
// the first handshake after this long. A Secret or ConfigMap volume is
// updated by the kubelet within about a minute; ten seconds adds little and
// keeps the read off most handshakes (the API server reuses connections).
const clientCARecheck = 10 * time.Second

// ClientCA is the pool of CAs that webhook callers' certificates must chain
// to (ServerOptions.ClientCA), read from a PEM file and re-read when it
// changes.
//
// controller-runtime's webhook.Options.ClientCAName does the verification
// too, but reads the file once at start and only from the serving cert
// directory, which cert-manager or --cert-mode=self own. ClientCA takes any
// path (a separately mounted Secret or ConfigMap) and follows a rotated CA
// without a restart.
//
// Safe for concurrent use: handshakes call pool from many goroutines.
type ClientCA struct {
	path string
	now  func() time.Time

	mu      sync.Mutex
	pem     []byte
	pool    *x509.CertPool
	checked time.Time
}

// LoadClientCA reads the CA file at path; a missing, empty or unparsable
// file is an error, so a misconfigured webhook does not start.
func LoadClientCA(path string) (*ClientCA, error) {
	ca := &ClientCA{path: path, now: time.Now}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read client CA file: %w", err)
	}
	pool, err := parseCAPool(b)
	if err != nil {
		return nil, fmt.Errorf("client CA file %s: %w", path, err)
	}
	ca.pem, ca.pool, ca.checked = b, pool, ca.now()
	return ca, nil
}

// parseCAPool parses PEM certificates into a pool; it needs at least one.
func parseCAPool(b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("no PEM certificate in it")
	}
	return pool, nil
}

// current returns the pool, re-reading the file first when clientCARecheck
// has passed since the last read. A file that cannot be read or parsed
// keeps the last good pool: a half-written update must not lock the API
// server out.
func (ca *ClientCA) current() *x509.CertPool {
	ca.mu.Lock()
	defer ca.mu.Unlock()
	if now := ca.now(); now.Sub(ca.checked) >= clientCARecheck {
		ca.checked = now
		ca.reload()
	}
	return ca.pool
}

// reload re-reads the file; the caller holds mu.
func (ca *ClientCA) reload() {
	log := logf.Log.WithName("client-ca")
	b, err := os.ReadFile(ca.path)
	if err != nil {
		log.Error(err, "re-read client CA file; keeping the previous CA", "path", ca.path)
		return
	}
	if bytes.Equal(b, ca.pem) {
		return
	}
	pool, err := parseCAPool(b)
	if err != nil {
		log.Error(err, "parse client CA file; keeping the previous CA", "path", ca.path)
		return
	}
	ca.pem, ca.pool = b, pool
	log.Info("client CA reloaded", "path", ca.path)
}

// requireClientCert makes c demand a client certificate that chains to
// ca's current pool (tls.RequireAndVerifyClientCert) and, when names is not
// empty, whose subject common name or a DNS name is one of them. A caller
// without such a certificate fails the TLS handshake: no HTTP request is
// read from it. Each handshake gets a copy of c with the pool current at
// that moment; connections already open keep the CA they were verified
// with.
func requireClientCert(c *tls.Config, ca *ClientCA, names []string) {
	c.ClientAuth = tls.RequireAndVerifyClientCert
	c.ClientCAs = ca.current()
	if len(names) > 0 {
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("no client certificate")
			}
			return allowedClient(cs.PeerCertificates[0], names)
		}
	}
	// c itself is what the listener uses; by the time a client connects,
	// controller-runtime has set c.GetCertificate, which the copy keeps.
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		conn := c.Clone()
		conn.ClientCAs = ca.current()
		return conn, nil
	}
}

// allowedClient reports whether cert is named one of names, by its subject
// common name or one of its DNS names.
func allowedClient(cert *x509.Certificate, names []string) error {
	if slices.Contains(names, cert.Subject.CommonName) {
		return nil
	}
	for _, n := range cert.DNSNames {
		if slices.Contains(names, n) {
			return nil
		}
	}
	return fmt.Errorf("client certificate %q (DNS names %v) is not one of the allowed names %v", cert.Subject.CommonName, cert.DNSNames, names)
}
