package certs

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"time"
)

// maxBackdate is how far before "now" a new certificate becomes valid, so
// an API server whose clock runs a little behind still accepts it. Short
// validities (tests) backdate by a tenth of their lifetime instead.
const maxBackdate = time.Minute

// PEM block types written by this package. Keys are read in PKCS #8 and in
// SEC 1 form, so a Secret filled by hand with `openssl ecparam` also works.
const (
	pemCertificate = "CERTIFICATE"
	pemPrivateKey  = "PRIVATE KEY"
	pemECKey       = "EC PRIVATE KEY"
)

// keyPair is a parsed certificate with its private key, and the PEM they were
// read from or written to.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// validityWindow returns NotBefore and NotAfter for a certificate issued at
// now for d, never outliving limit (the issuer's NotAfter) when limit is set.
func validityWindow(now time.Time, d time.Duration, limit time.Time) (time.Time, time.Time) {
	backdate := min(maxBackdate, d/10)
	notBefore := now.Add(-backdate).Truncate(time.Second)
	notAfter := now.Add(d).Truncate(time.Second)
	if !limit.IsZero() && notAfter.After(limit) {
		notAfter = limit
	}
	return notBefore, notAfter
}

// newCA generates a self-signed ECDSA P-256 CA certificate valid for d from
// now. The common name carries the issue time so that successive CAs are told
// apart in a bundle, in logs and by a verifier.
func newCA(now time.Time, d time.Duration, commonName string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate ca key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notBefore, notAfter := validityWindow(now, d, time.Time{})
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", commonName, now.Unix())},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	return sign(tmpl, tmpl, key, key)
}

// issueServing issues a serving certificate for dnsNames from ca, valid for
// d from now but never beyond the CA's own NotAfter: a chain with an
// expired CA does not verify.
func issueServing(ca *keyPair, now time.Time, d time.Duration, dnsNames []string) (*keyPair, error) {
	if len(dnsNames) == 0 {
		return nil, errors.New("issue serving certificate: no DNS names")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate serving key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	notBefore, notAfter := validityWindow(now, d, ca.cert.NotAfter)
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: dnsNames[0]},
		DNSNames:     dnsNames,
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	return sign(tmpl, ca.cert, key, ca.key)
}

// sign creates the certificate tmpl for key, signed by parent's signer, and
// returns it parsed and PEM-encoded.
func sign(tmpl, parent *x509.Certificate, key *ecdsa.PrivateKey, signer crypto.Signer) (*keyPair, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return nil, fmt.Errorf("create certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse new certificate: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("marshal key: %w", err)
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: pemCertificate, Bytes: der}),
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: keyDER}),
	}, nil
}

// randomSerial is a random positive 128-bit serial number (RFC 5280 allows
// up to 20 octets).
func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, fmt.Errorf("serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// parseKeyPair parses a PEM certificate (the first CERTIFICATE block) and
// its PEM private key and checks that they belong together.
func parseKeyPair(certPEM, keyPEM []byte) (*keyPair, error) {
	cert, err := parseCertificate(certPEM)
	if err != nil {
		return nil, err
	}
	key, err := parsePrivateKey(keyPEM)
	if err != nil {
		return nil, err
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(cert.PublicKey) {
		return nil, errors.New("private key does not match the certificate")
	}
	return &keyPair{cert: cert, key: key, certPEM: certPEM, keyPEM: keyPEM}, nil
}

// parseCertificate parses the first CERTIFICATE block of data.
func parseCertificate(data []byte) (*x509.Certificate, error) {
	certs, err := parseCertificates(data)
	if err != nil {
		return nil, err
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate in PEM data")
	}
	return certs[0], nil
}

// parseCertificates parses every CERTIFICATE block of data, in order, and
// ignores other blocks.
func parseCertificates(data []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for rest := data; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out, nil
		}
		if block.Type != pemCertificate {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse certificate: %w", err)
		}
		out = append(out, c)
	}
}

// parsePrivateKey parses a PKCS #8 or SEC 1 PEM private key.
func parsePrivateKey(data []byte) (crypto.Signer, error) {
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, errors.New("no PEM private key")
	}
	switch block.Type {
	case pemPrivateKey:
		k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse private key: %w", err)
		}
		s, ok := k.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("private key of type %T cannot sign", k)
		}
		return s, nil
	case pemECKey:
		k, err := x509.ParseECPrivateKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse private key: %w", err)
		}
		return k, nil
	default:
		return nil, fmt.Errorf("unsupported PEM block %q for a private key", block.Type)
	}
}

// usable says why c cannot be used at now, or "" when it can: within its
// validity window and, when wantCA is set, a CA that may sign certificates.
func usable(c *x509.Certificate, now time.Time, wantCA bool) string {
	switch {
	case now.Before(c.NotBefore):
		return fmt.Sprintf("not valid before %s", c.NotBefore.UTC().Format(time.RFC3339))
	case !now.Before(c.NotAfter):
		return fmt.Sprintf("expired at %s", c.NotAfter.UTC().Format(time.RFC3339))
	case wantCA && (!c.IsCA || c.KeyUsage&x509.KeyUsageCertSign == 0):
		return "not a CA certificate"
	}
	return ""
}

// verifyServing says why serving is not a valid serving certificate for
// every name in dnsNames, chained to ca, at now; "" when it is.
func verifyServing(serving, ca *x509.Certificate, dnsNames []string, now time.Time) string {
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, name := range dnsNames {
		_, err := serving.Verify(x509.VerifyOptions{
			DNSName:     name,
			Roots:       roots,
			CurrentTime: now,
			KeyUsages:   []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		})
		if err != nil {
			return fmt.Sprintf("does not verify for %s against the active CA: %v", name, err)
		}
	}
	return ""
}

// renewalTime is when a certificate is due for renewal: at two thirds of its
// lifetime.
func renewalTime(c *x509.Certificate) time.Time {
	return c.NotBefore.Add(c.NotAfter.Sub(c.NotBefore) * 2 / 3)
}

// concatPEM joins PEM blocks, each ending in exactly one newline.
func concatPEM(blocks ...[]byte) []byte {
	var b bytes.Buffer
	for _, p := range blocks {
		p = bytes.TrimSpace(p)
		if len(p) == 0 {
			continue
		}
		b.Write(p)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
