package certs

import (
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Keys of the certificate Secret. tls.crt and tls.key make it a valid
// kubernetes.io/tls Secret; the CA entries follow cert-manager's ca.crt.
const (
	// SecretKeyServingCert is the serving certificate (leaf only), PEM.
	SecretKeyServingCert = corev1.TLSCertKey
	// SecretKeyServingKey is the serving certificate's private key, PEM.
	SecretKeyServingKey = corev1.TLSPrivateKeyKey
	// SecretKeyCACert is the active CA, the issuer of tls.crt, PEM.
	SecretKeyCACert = "ca.crt"
	// SecretKeyCAKey is the active CA's private key, PEM.
	SecretKeyCAKey = "ca.key"
	// SecretKeyNextCACert is the CA being introduced during a rotation: it
	// is in every caBundle but issues nothing yet.
	SecretKeyNextCACert = "ca-next.crt"
	// SecretKeyNextCAKey is the next CA's private key.
	SecretKeyNextCAKey = "ca-next.key"
	// SecretKeyPreviousCACert is the CA retired by the last rotation, kept
	// in every caBundle for the overlap so replicas still serving a
	// certificate it issued are trusted.
	SecretKeyPreviousCACert = "ca-previous.crt"
)

// Annotations on the certificate Secret that carry the rotation's clock, so
// a new leader resumes a rotation where the last one left it.
const (
	// AnnotationNextCAPublishedAt is when every caBundle was first seen to
	// hold the next CA (RFC 3339). The switch waits one overlap after it.
	AnnotationNextCAPublishedAt = "virtstation.io/ca-next-published-at"
	// AnnotationCASwitchedAt is when the next CA became the active one
	// (RFC 3339). The previous CA leaves the bundles one overlap after it.
	AnnotationCASwitchedAt = "virtstation.io/ca-switched-at"
)

// material is what the certificate Secret holds, parsed. A nil pointer is
// an absent entry; an entry that is present but does not parse is nil with
// its error set, so plan can say why it replaces it.
type material struct {
	ca       *keyPair
	next     *keyPair
	serving  *keyPair
	previous *x509.Certificate
	// previousPEM is previous as stored.
	previousPEM []byte

	caErr, nextErr, servingErr, previousErr error

	// nextPublishedAt and switchedAt are zero when unset (or unreadable).
	nextPublishedAt time.Time
	switchedAt      time.Time
}

// parseMaterial reads a Secret's data and annotations. It never fails: what
// is broken is recorded per entry.
func parseMaterial(data map[string][]byte, annotations map[string]string) *material {
	m := &material{}
	m.ca, m.caErr = parseEntry(data, SecretKeyCACert, SecretKeyCAKey)
	m.next, m.nextErr = parseEntry(data, SecretKeyNextCACert, SecretKeyNextCAKey)
	m.serving, m.servingErr = parseEntry(data, SecretKeyServingCert, SecretKeyServingKey)
	if p := data[SecretKeyPreviousCACert]; len(p) > 0 {
		m.previous, m.previousErr = parseCertificate(p)
		if m.previousErr == nil {
			m.previousPEM = p
		}
	}
	m.nextPublishedAt = parseTime(annotations[AnnotationNextCAPublishedAt])
	m.switchedAt = parseTime(annotations[AnnotationCASwitchedAt])
	return m
}

// parseEntry parses the key pair under certKey and keyKey: nil, nil when
// both are absent.
func parseEntry(data map[string][]byte, certKey, keyKey string) (*keyPair, error) {
	c, k := data[certKey], data[keyKey]
	switch {
	case len(c) == 0 && len(k) == 0:
		return nil, nil
	case len(c) == 0:
		return nil, fmt.Errorf("%s is missing", certKey)
	case len(k) == 0:
		return nil, fmt.Errorf("%s is missing", keyKey)
	}
	kp, err := parseKeyPair(c, k)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", certKey, err)
	}
	return kp, nil
}

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}
	}
	return t
}

// writeTo stores m into a Secret's data and annotations, deleting the entries
// m does not have. Other keys and annotations are left alone.
func (m *material) writeTo(data map[string][]byte, annotations map[string]string) {
	putPair(data, SecretKeyCACert, SecretKeyCAKey, m.ca)
	putPair(data, SecretKeyNextCACert, SecretKeyNextCAKey, m.next)
	putPair(data, SecretKeyServingCert, SecretKeyServingKey, m.serving)
	if m.previous != nil {
		data[SecretKeyPreviousCACert] = m.previousPEM
	} else {
		delete(data, SecretKeyPreviousCACert)
	}
	putTime(annotations, AnnotationNextCAPublishedAt, m.nextPublishedAt)
	putTime(annotations, AnnotationCASwitchedAt, m.switchedAt)
}

func putPair(data map[string][]byte, certKey, keyKey string, kp *keyPair) {
	if kp == nil {
		delete(data, certKey)
		delete(data, keyKey)
		return
	}
	data[certKey], data[keyKey] = kp.certPEM, kp.keyPEM
}

func putTime(annotations map[string]string, key string, t time.Time) {
	if t.IsZero() {
		delete(annotations, key)
		return
	}
	annotations[key] = t.UTC().Format(time.RFC3339)
}

// bundle is the caBundle every webhook should carry: the previous CA (during
// the overlap after a switch), the active CA, and the next CA (during the
// overlap before it), oldest first. The order keeps the bytes unchanged
// across a switch: [active, next] becomes [previous, active].
func (m *material) bundle() []byte {
	var blocks [][]byte
	if m.previous != nil {
		blocks = append(blocks, m.previousPEM)
	}
	if m.ca != nil {
		blocks = append(blocks, m.ca.certPEM)
	}
	if m.next != nil {
		blocks = append(blocks, m.next.certPEM)
	}
	return concatPEM(blocks...)
}
