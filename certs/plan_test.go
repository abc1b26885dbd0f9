package certs

import (
	"strings"
	"testing"
	"time"
)

var (
	testNames   = DNSNames("virtstation-webhook", "virtstation-system", DefaultClusterDomain)
	testPolicy  = policy{dnsNames: testNames, overlap: 24 * time.Hour}
	t0          = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	caLife      = 300 * 24 * time.Hour
	servingLife = 90 * 24 * time.Hour
	mutating    = configRef{mutatingKind, "virtstation-mutating"}
	validating  = configRef{validatingKind, "virtstation-validating"}
)

// fixtures are key pairs shared by the table: generating ECDSA keys is cheap
// but there is no need to do it per case.
type fixtures struct {
	caA, caB, caExpired *keyPair
	servingA            *keyPair // from caA at t0
	servingB            *keyPair // from caB at t0
	servingWrongNames   *keyPair
	servingFromOtherCA  *keyPair
}

func newFixtures(t *testing.T) *fixtures {
	t.Helper()
	must := func(kp *keyPair, err error) *keyPair {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	f := &fixtures{}
	f.caA = must(newCA(t0, caLife, "a"))
	f.caB = must(newCA(t0, caLife, "b"))
	f.caExpired = must(newCA(t0.Add(-2*caLife), caLife, "old"))
	f.servingA = must(issueServing(f.caA, t0, servingLife, testNames))
	f.servingB = must(issueServing(f.caB, t0, servingLife, testNames))
	f.servingWrongNames = must(issueServing(f.caA, t0, servingLife, DNSNames("other", "virtstation-system", DefaultClusterDomain)))
	other := must(newCA(t0, caLife, "other"))
	f.servingFromOtherCA = must(issueServing(other, t0, servingLife, testNames))
	return f
}

// bundlesOf returns the observed bundles of the shipped configurations (one
// mutating webhook, two validating ones), each holding pem.
func bundlesOf(pems ...[]byte) []webhookBundle {
	out := []webhookBundle{
		{config: mutating, webhook: "vm.mutate.virtstation.io"},
		{config: validating, webhook: "policy.validate.virtstation.io"},
		{config: validating, webhook: "vm.validate.virtstation.io"},
	}
	for i := range out {
		if i < len(pems) {
			out[i].caBundle = pems[i]
		}
	}
	return out
}

func TestPlan(t *testing.T) {
	f := newFixtures(t)
	steady := func() *material { return &material{ca: f.caA, serving: f.servingA} }
	bundleA := concatPEM(f.caA.certPEM)
	bundleAB := concatPEM(f.caA.certPEM, f.caB.certPEM)
	bundleBPrev := concatPEM(f.caA.certPEM, f.caB.certPEM) // previous A, active B: same bytes as A+B
	servingRenewal := renewalTime(f.servingA.cert)
	caRotation := caRotationTime(f.caA.cert, testPolicy.overlap)
	published := t0.Add(time.Hour)
	switched := t0.Add(2 * time.Hour)

	type want struct {
		kind   actionKind
		config configRef
		reason string // a substring of the reason
	}
	cases := map[string]struct {
		secret  *material
		bundles []webhookBundle
		now     time.Time
		want    []want
		wake    time.Time
	}{
		"no Secret: generate everything": {
			now:  t0,
			want: []want{{kind: actGenerate, reason: "does not exist"}},
		},
		"empty Secret: generate": {
			secret: &material{},
			now:    t0,
			want:   []want{{kind: actGenerate, reason: "is missing"}},
		},
		"CA does not parse: generate": {
			secret: parseMaterial(map[string][]byte{SecretKeyCACert: []byte("junk"), SecretKeyCAKey: f.caA.keyPEM}, nil),
			now:    t0,
			want:   []want{{kind: actGenerate, reason: "does not parse"}},
		},
		"CA key of another CA: generate": {
			secret: parseMaterial(map[string][]byte{SecretKeyCACert: f.caA.certPEM, SecretKeyCAKey: f.caB.keyPEM}, nil),
			now:    t0,
			want:   []want{{kind: actGenerate, reason: "does not match"}},
		},
		"CA expired and no next CA: generate": {
			secret: &material{ca: f.caExpired, serving: f.servingA},
			now:    t0,
			want:   []want{{kind: actGenerate, reason: "expired"}},
		},
		"CA expired but the next CA is usable: promote it": {
			secret: &material{ca: f.caExpired, next: f.caB, serving: f.servingA},
			now:    t0,
			want:   []want{{kind: actSwitchCA, reason: "promoting the next CA early"}},
		},
		"steady state: nothing to do until the serving renewal": {
			secret:  steady(),
			bundles: bundlesOf(bundleA, bundleA, bundleA),
			now:     t0,
			wake:    servingRenewal,
		},
		"no webhook configuration exists: nothing to do": {
			secret: steady(),
			now:    t0,
			wake:   servingRenewal,
		},
		"a cleared caBundle is repaired": {
			secret:  steady(),
			bundles: bundlesOf(bundleA, nil, bundleA),
			now:     t0,
			want:    []want{{kind: actSyncBundle, config: validating, reason: "policy.validate.virtstation.io is empty"}},
			wake:    servingRenewal,
		},
		"stale bundles in both configurations": {
			secret:  steady(),
			bundles: bundlesOf(f.caB.certPEM, bundleA, f.caB.certPEM),
			now:     t0,
			want: []want{
				{kind: actSyncBundle, config: mutating, reason: "vm.mutate.virtstation.io is out of date"},
				{kind: actSyncBundle, config: validating, reason: "vm.validate.virtstation.io is out of date"},
			},
			wake: servingRenewal,
		},
		"serving certificate missing": {
			secret:  &material{ca: f.caA},
			bundles: bundlesOf(bundleA, bundleA, bundleA),
			now:     t0,
			want:    []want{{kind: actIssueServing, reason: "missing"}},
		},
		"serving certificate does not parse": {
			secret: parseMaterial(map[string][]byte{
				SecretKeyCACert: f.caA.certPEM, SecretKeyCAKey: f.caA.keyPEM,
				SecretKeyServingCert: f.servingA.certPEM,
			}, nil),
			now:  t0,
			want: []want{{kind: actIssueServing, reason: "tls.key is missing"}},
		},
		"serving certificate for other names": {
			secret: &material{ca: f.caA, serving: f.servingWrongNames},
			now:    t0,
			want:   []want{{kind: actIssueServing, reason: "virtstation-webhook"}},
		},
		"serving certificate from another CA": {
			secret: &material{ca: f.caA, serving: f.servingFromOtherCA},
			now:    t0,
			want:   []want{{kind: actIssueServing, reason: "against the active CA"}},
		},
		"serving certificate at two thirds of its lifetime": {
			secret:  steady(),
			bundles: bundlesOf(bundleA, bundleA, bundleA),
			now:     servingRenewal,
			want:    []want{{kind: actIssueServing, reason: "two thirds"}},
		},
		"CA at two thirds of its lifetime: start the rotation": {
			secret:  &material{ca: f.caA, serving: mustIssue(t, f.caA, caRotation)},
			bundles: bundlesOf(bundleA, bundleA, bundleA),
			now:     caRotation,
			want:    []want{{kind: actStartCARotation, reason: "expires at"}},
		},
		"CA rotation and serving renewal due together": {
			secret: steady(),
			now:    caRotation,
			want:   []want{{kind: actStartCARotation}, {kind: actIssueServing}},
		},
		"next CA not yet in every bundle: publish it": {
			secret:  &material{ca: f.caA, next: f.caB, serving: f.servingA},
			bundles: bundlesOf(bundleAB, bundleA, bundleA),
			now:     t0,
			want: []want{
				{kind: actSyncBundle, config: validating, reason: "policy.validate.virtstation.io, vm.validate.virtstation.io"},
			},
			wake: servingRenewal,
		},
		"next CA in every bundle: record it": {
			secret:  &material{ca: f.caA, next: f.caB, serving: f.servingA},
			bundles: bundlesOf(bundleAB, bundleAB, bundleAB),
			now:     t0,
			want:    []want{{kind: actRecordPublished}},
		},
		"next CA published, overlap running: wait for its end": {
			secret:  &material{ca: f.caA, next: f.caB, serving: f.servingA, nextPublishedAt: published},
			bundles: bundlesOf(bundleAB, bundleAB, bundleAB),
			now:     published.Add(time.Hour),
			wake:    published.Add(testPolicy.overlap),
		},
		"overlap over: switch, and do not also renew from the old CA": {
			secret:  &material{ca: f.caA, next: f.caB, serving: f.servingA, nextPublishedAt: published},
			bundles: bundlesOf(bundleAB, bundleAB, bundleAB),
			now:     servingRenewal, // also the serving renewal time
			want:    []want{{kind: actSwitchCA, reason: "since"}},
		},
		"a drifted bundle during the overlap is repaired, the clock keeps running": {
			secret:  &material{ca: f.caA, next: f.caB, serving: f.servingA, nextPublishedAt: published},
			bundles: bundlesOf(bundleAB, nil, bundleAB),
			now:     published.Add(time.Hour),
			want:    []want{{kind: actSyncBundle, config: validating}},
			wake:    published.Add(testPolicy.overlap),
		},
		"next CA does not parse: discard it": {
			secret: parseMaterial(map[string][]byte{
				SecretKeyCACert: f.caA.certPEM, SecretKeyCAKey: f.caA.keyPEM,
				SecretKeyServingCert: f.servingA.certPEM, SecretKeyServingKey: f.servingA.keyPEM,
				SecretKeyNextCACert: []byte("junk"), SecretKeyNextCAKey: f.caB.keyPEM,
			}, nil),
			bundles: bundlesOf(bundleA, bundleA, bundleA),
			now:     t0,
			want:    []want{{kind: actDiscardNextCA}},
		},
		"next CA expired: discard it": {
			secret: &material{ca: f.caA, next: f.caExpired, serving: f.servingA},
			now:    t0,
			want:   []want{{kind: actDiscardNextCA, reason: "expired"}},
		},
		"previous CA without a switch time: stamp it": {
			secret:  &material{ca: f.caB, previous: f.caA.cert, previousPEM: f.caA.certPEM, serving: f.servingB},
			bundles: bundlesOf(bundleBPrev, bundleBPrev, bundleBPrev),
			now:     t0,
			want:    []want{{kind: actRecordSwitched}},
		},
		"previous CA during the overlap: keep it until its end": {
			secret:  &material{ca: f.caB, previous: f.caA.cert, previousPEM: f.caA.certPEM, serving: f.servingB, switchedAt: switched},
			bundles: bundlesOf(bundleBPrev, bundleBPrev, bundleBPrev),
			now:     switched.Add(time.Hour),
			wake:    switched.Add(testPolicy.overlap),
		},
		"previous CA after the overlap: drop it": {
			secret:  &material{ca: f.caB, previous: f.caA.cert, previousPEM: f.caA.certPEM, serving: f.servingB, switchedAt: switched},
			bundles: bundlesOf(bundleBPrev, bundleBPrev, bundleBPrev),
			now:     switched.Add(testPolicy.overlap),
			want:    []want{{kind: actDropPreviousCA, reason: "since"}},
		},
		"previous CA does not parse: drop it": {
			secret: parseMaterial(map[string][]byte{
				SecretKeyCACert: f.caB.certPEM, SecretKeyCAKey: f.caB.keyPEM,
				SecretKeyServingCert: f.servingB.certPEM, SecretKeyServingKey: f.servingB.keyPEM,
				SecretKeyPreviousCACert: []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
			}, nil),
			now:  t0,
			want: []want{{kind: actDropPreviousCA, reason: "does not parse"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, wake := plan(state{secret: tc.secret, bundles: tc.bundles}, tc.now, testPolicy)
			if len(got) != len(tc.want) {
				t.Fatalf("plan = %v, want %d actions %v", got, len(tc.want), tc.want)
			}
			for i, w := range tc.want {
				g := got[i]
				if g.kind != w.kind || g.config != w.config || !strings.Contains(g.reason, w.reason) {
					t.Errorf("action %d = %s %v %q, want %s %v containing %q", i, g.kind, g.config, g.reason, w.kind, w.config, w.reason)
				}
			}
			if !wake.Equal(tc.wake) {
				t.Errorf("wake = %v, want %v", wake, tc.wake)
			}
		})
	}
}

func mustIssue(t *testing.T, ca *keyPair, now time.Time) *keyPair {
	t.Helper()
	kp, err := issueServing(ca, now, servingLife, testNames)
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func TestCARotationTime(t *testing.T) {
	f := newFixtures(t)
	c := f.caA.cert
	cases := map[string]struct {
		overlap time.Duration
		want    time.Time
	}{
		"two thirds of the lifetime":        {overlap: time.Hour, want: renewalTime(c)},
		"three overlaps before expiry wins": {overlap: 40 * 24 * time.Hour, want: c.NotAfter.Add(-120 * 24 * time.Hour)},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := caRotationTime(c, tc.overlap); !got.Equal(tc.want) {
				t.Errorf("caRotationTime = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestBundlePatch(t *testing.T) {
	want := []byte("B")
	cases := map[string]struct {
		current [][]byte
		patch   string
	}{
		"all current": {current: [][]byte{want, want}},
		"one empty, one stale": {
			current: [][]byte{nil, want, []byte("A")},
			patch:   `[{"op":"test","path":"/metadata/resourceVersion","value":"42"},{"op":"add","path":"/webhooks/0/clientConfig/caBundle","value":"Qg=="},{"op":"add","path":"/webhooks/2/clientConfig/caBundle","value":"Qg=="}]`,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := bundlePatch("42", tc.current, want)
			if err != nil {
				t.Fatal(err)
			}
			if string(p) != tc.patch {
				t.Errorf("patch = %s, want %s", p, tc.patch)
			}
		})
	}
}
