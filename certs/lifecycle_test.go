package certs

import (
	"crypto/x509"
	"testing"
	"time"
)

// TestLifecycle plays the leader and the replicas over several CA lifetimes
// on a simulated clock, through plan, apply and the Secret encoding, and
// checks every three hours that what any replica serves, caught up or one
// step behind, verifies against every webhook's caBundle: no rotation step ever
// makes an admission fail on TLS.
func TestLifecycle(t *testing.T) {
	const day = 24 * time.Hour
	r, err := New(nil, Options{
		Namespace: "virtstation-system", CertDir: t.TempDir(),
		CAValidity: 30 * day, ServingValidity: 10 * day, Overlap: day,
	})
	if err != nil {
		t.Fatal(err)
	}
	serverName := DNSNames(r.opts.ServiceName, r.opts.Namespace, r.opts.ClusterDomain)[2]
	bundles := bundlesOf()
	var m *material
	counts := map[actionKind]int{}
	var lagging *x509.Certificate // what a replica one tick behind serves

	verify := func(now time.Time, c *x509.Certificate, b webhookBundle) {
		t.Helper()
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(b.caBundle) {
			t.Fatalf("%s: %s has an empty caBundle", now, b.webhook)
		}
		if _, err := c.Verify(x509.VerifyOptions{DNSName: serverName, Roots: pool, CurrentTime: now}); err != nil {
			t.Fatalf("%s: certificate from %s does not verify against the caBundle of %s: %v", now, c.Issuer.CommonName, b.webhook, err)
		}
	}

	for now := t0; now.Before(t0.Add(100 * day)); now = now.Add(3 * time.Hour) {
		settled := false
		for range maxSteps {
			acts, _ := plan(state{secret: m, bundles: bundles}, now, r.policy)
			if len(acts) == 0 {
				settled = true
				break
			}
			for _, a := range acts {
				counts[a.kind]++
			}
			if acts[0].mutatesSecret() {
				next, err := r.apply(m, acts, now)
				if err != nil {
					t.Fatal(err)
				}
				// Through the Secret's encoding, as the leader reads it back.
				data, ann := map[string][]byte{}, map[string]string{}
				next.writeTo(data, ann)
				m = parseMaterial(data, ann)
				// A replica may load the new Secret before the leader
				// patches any bundle: it must verify against the bundles
				// as they are (first generation aside: nothing trusted yet).
				if acts[0].kind != actGenerate {
					for _, b := range bundles {
						verify(now, m.serving.cert, b)
					}
				}
				continue
			}
			for _, a := range acts {
				for i := range bundles {
					if bundles[i].config == a.config {
						bundles[i].caBundle = m.bundle()
					}
				}
			}
		}
		if !settled {
			t.Fatalf("%s: plan did not settle", now)
		}
		for _, b := range bundles {
			if n := len(mustCerts(t, b.caBundle)); n > 2 {
				t.Fatalf("%s: %s trusts %d CAs", now, b.webhook, n)
			}
			verify(now, m.serving.cert, b)
			if lagging != nil {
				verify(now, lagging, b)
			}
		}
		lagging = m.serving.cert
	}

	// 100 days of 30-day CAs rotated at two thirds: the first at day 20,
	// then every 20 days or so; each rotation runs all its steps.
	if counts[actGenerate] != 1 {
		t.Errorf("generated %d times, want once", counts[actGenerate])
	}
	rot := counts[actStartCARotation]
	if rot < 4 || counts[actRecordPublished] != rot || counts[actSwitchCA] != rot || counts[actDropPreviousCA] < rot-1 {
		t.Errorf("rotation steps = %v, want 4 or more complete rotations", counts)
	}
	if counts[actIssueServing] < 5 {
		t.Errorf("serving certificate renewed %d times, want at least 5 in 100 days of 10-day certificates", counts[actIssueServing])
	}
	t.Logf("steps over 100 days: %v", counts)
}

func mustCerts(t *testing.T, pemData []byte) []*x509.Certificate {
	t.Helper()
	c, err := parseCertificates(pemData)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
