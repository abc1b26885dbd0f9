package certs

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"strings"
	"testing"
	"time"
)

func TestIssuedChain(t *testing.T) {
	now := time.Now()
	ca, err := newCA(now, time.Hour, "virtstation-webhook-ca")
	if err != nil {
		t.Fatal(err)
	}
	s, err := issueServing(ca, now, 2*time.Hour, testNames)
	if err != nil {
		t.Fatal(err)
	}
	if !s.cert.NotAfter.Equal(ca.cert.NotAfter) {
		t.Errorf("serving NotAfter = %v, want capped at the CA's %v", s.cert.NotAfter, ca.cert.NotAfter)
	}
	if why := verifyServing(s.cert, ca.cert, testNames, now); why != "" {
		t.Errorf("serving certificate: %s", why)
	}
	if why := verifyServing(s.cert, ca.cert, []string{"virtstation-webhook.other.svc"}, now); !strings.Contains(why, "other") {
		t.Errorf("verify for another name = %q, want a failure naming it", why)
	}
	if _, ok := s.key.(*ecdsa.PrivateKey); !ok || s.cert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("serving key is %T, want ECDSA", s.key)
	}
	if why := usable(s.cert, now, true); why != "not a CA certificate" {
		t.Errorf("usable(serving as CA) = %q", why)
	}
}

func TestParseKeyPair(t *testing.T) {
	ca, err := newCA(time.Now(), time.Hour, "a")
	if err != nil {
		t.Fatal(err)
	}
	other, err := newCA(time.Now(), time.Hour, "b")
	if err != nil {
		t.Fatal(err)
	}
	sec1DER, err := x509.MarshalECPrivateKey(ca.key.(*ecdsa.PrivateKey))
	if err != nil {
		t.Fatal(err)
	}
	sec1 := pem.EncodeToMemory(&pem.Block{Type: pemECKey, Bytes: sec1DER})
	cases := map[string]struct {
		cert, key []byte
		err       string
	}{
		"PKCS #8":          {cert: ca.certPEM, key: ca.keyPEM},
		"SEC 1":            {cert: ca.certPEM, key: sec1},
		"key of another":   {cert: ca.certPEM, key: other.keyPEM, err: "does not match"},
		"no certificate":   {cert: ca.keyPEM, key: ca.keyPEM, err: "no certificate"},
		"no key":           {cert: ca.certPEM, key: []byte("x"), err: "no PEM private key"},
		"wrong key block":  {cert: ca.certPEM, key: ca.certPEM, err: "unsupported PEM block"},
		"corrupt key body": {cert: ca.certPEM, key: pem.EncodeToMemory(&pem.Block{Type: pemPrivateKey, Bytes: []byte{1}}), err: "parse private key"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := parseKeyPair(tc.cert, tc.key)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("parseKeyPair error = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	cases := map[string]struct {
		opts Options
		err  string
	}{
		"defaults":          {opts: Options{Namespace: "ns", CertDir: "/d"}},
		"no namespace":      {opts: Options{CertDir: "/d"}, err: "namespace is required"},
		"no cert dir":       {opts: Options{Namespace: "ns"}, err: "cert dir is required"},
		"overlap too long":  {opts: Options{Namespace: "ns", CertDir: "/d", CAValidity: 6 * time.Hour, Overlap: 2 * time.Hour}, err: "three overlaps"},
		"negative duration": {opts: Options{Namespace: "ns", CertDir: "/d", ServingValidity: -time.Second}, err: "positive"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := New(nil, tc.opts)
			if tc.err == "" && err != nil || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("New error = %v, want %q", err, tc.err)
			}
		})
	}
}

// FuzzParseMaterial feeds arbitrary Secret contents to the parser the
// leader runs on whatever the Secret holds: it must never panic, and what it
// accepts must encode back to the same entries.
func FuzzParseMaterial(f *testing.F) {
	ca, err := newCA(time.Now(), time.Hour, "seed")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(ca.certPEM, ca.keyPEM, []byte{}, "")
	f.Add(ca.certPEM, ca.keyPEM, ca.certPEM, "2030-01-01T00:00:00Z")
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nAA==\n-----END CERTIFICATE-----\n"), []byte("junk"), []byte("junk"), "x")
	f.Fuzz(func(t *testing.T, cert, key, previous []byte, switched string) {
		m := parseMaterial(map[string][]byte{
			SecretKeyCACert: cert, SecretKeyCAKey: key,
			SecretKeyServingCert: cert, SecretKeyServingKey: key,
			SecretKeyPreviousCACert: previous,
		}, map[string]string{AnnotationCASwitchedAt: switched})
		_ = m.bundle()
		data, ann := map[string][]byte{}, map[string]string{}
		m.writeTo(data, ann)
		back := parseMaterial(data, ann)
		if (m.ca == nil) != (back.ca == nil) || (m.previous == nil) != (back.previous == nil) || !m.switchedAt.Equal(back.switchedAt) {
			t.Fatalf("round trip changed the material")
		}
		_, _ = plan(state{secret: m}, time.Now(), testPolicy)
	})
}
