package certs

import (
	"bytes"
	"crypto/x509"
	"fmt"
	"slices"
	"strings"
	"time"
)

// actionKind is one step the leader can take.
type actionKind string

const (
	// actGenerate creates a new CA and a serving certificate from it,
	// dropping whatever the Secret held: the first start, or an active CA
	// that is missing, broken or expired with no next CA to fall back on.
	actGenerate actionKind = "Generate"
	// actIssueServing issues a serving certificate from the active CA.
	actIssueServing actionKind = "IssueServing"
	// actStartCARotation generates the next CA. The bundles take it in the
	// same reconcile; it issues nothing yet.
	actStartCARotation actionKind = "StartCARotation"
	// actDiscardNextCA drops a next CA that is broken or unusable; a later
	// reconcile starts the rotation again.
	actDiscardNextCA actionKind = "DiscardNextCA"
	// actRecordPublished records that every bundle holds the next CA.
	actRecordPublished actionKind = "RecordPublished"
	// actSwitchCA makes the next CA the active one, keeps the old one as
	// previous and issues a serving certificate from the new CA.
	actSwitchCA actionKind = "SwitchCA"
	// actRecordSwitched stamps a previous CA that has no switch time (the
	// Secret was edited by hand), so the overlap is counted from now.
	actRecordSwitched actionKind = "RecordSwitched"
	// actDropPreviousCA removes the previous CA, and so from the bundles.
	actDropPreviousCA actionKind = "DropPreviousCA"
	// actSyncBundle patches the caBundle of the webhooks in one
	// configuration that differ from the Secret's bundle.
	actSyncBundle actionKind = "SyncBundle"
)

// configKind names the two kinds of webhook configuration.
type configKind string

const (
	mutatingKind   configKind = "MutatingWebhookConfiguration"
	validatingKind configKind = "ValidatingWebhookConfiguration"
)

// configRef names one webhook configuration.
type configRef struct {
	kind configKind
	name string
}

func (c configRef) String() string { return string(c.kind) + "/" + c.name }

// action is one step of a plan. config is set for actSyncBundle only.
type action struct {
	kind   actionKind
	reason string
	config configRef
}

// mutatesSecret reports whether the action changes the Secret (every kind
// but actSyncBundle).
func (a action) mutatesSecret() bool { return a.kind != actSyncBundle }

// webhookBundle is the caBundle one webhook carries now.
type webhookBundle struct {
	config   configRef
	webhook  string
	caBundle []byte
}

// state is what the leader observed: the Secret (nil when it does not
// exist) and the caBundle of every webhook of the configurations that exist.
type state struct {
	secret  *material
	bundles []webhookBundle
}

// policy is what plan needs from Options.
type policy struct {
	dnsNames []string
	overlap  time.Duration
}

// caRotationTime is when a rotation away from ca starts: at two thirds of
// its lifetime, and at the latest three overlaps before it expires, so
// that both overlaps fit with margin.
func caRotationTime(ca *x509.Certificate, overlap time.Duration) time.Time {
	t := renewalTime(ca)
	if latest := ca.NotAfter.Add(-3 * overlap); latest.Before(t) {
		t = latest
	}
	return t
}

// plan decides what the leader does next, given what it observed at now.
// It returns the actions in order (Secret changes first, then bundle
// patches) and when to look again if nothing happens meanwhile (zero: no
// deadline). It is pure: the same input gives the same plan.
//
// The caller applies the Secret changes, then plans again from what it
// reads back, so bundle patches always follow the Secret as written.
func plan(st state, now time.Time, p policy) ([]action, time.Time) {
	m := st.secret
	if m == nil {
		return []action{{kind: actGenerate, reason: "the Secret does not exist"}}, time.Time{}
	}
	if why := caProblem(m.ca, m.caErr, now); why != "" {
		if m.next != nil && usable(m.next.cert, now, true) == "" {
			return []action{{kind: actSwitchCA, reason: "the active CA " + why + "; promoting the next CA early"}}, time.Time{}
		}
		return []action{{kind: actGenerate, reason: "the active CA " + why}}, time.Time{}
	}

	var acts []action
	var wake time.Time
	switched := false
	switch {
	case m.nextErr != nil:
		acts = append(acts, action{kind: actDiscardNextCA, reason: m.nextErr.Error()})
	case m.next != nil:
		switch why := usable(m.next.cert, now, true); {
		case why != "":
			acts = append(acts, action{kind: actDiscardNextCA, reason: "the next CA is " + why})
		case m.nextPublishedAt.IsZero():
			if bundlesMatch(st.bundles, m.bundle()) {
				acts = append(acts, action{kind: actRecordPublished, reason: "every caBundle holds the next CA"})
			}
			// Otherwise the bundle patches below publish it first.
		case !now.Before(m.nextPublishedAt.Add(p.overlap)):
			acts = append(acts, action{kind: actSwitchCA, reason: fmt.Sprintf("the next CA has been in every caBundle since %s", m.nextPublishedAt.UTC().Format(time.RFC3339))})
			switched = true
		default:
			wake = m.nextPublishedAt.Add(p.overlap)
		}
	case m.previousErr != nil:
		acts = append(acts, action{kind: actDropPreviousCA, reason: "the previous CA does not parse: " + m.previousErr.Error()})
	case m.previous != nil:
		switch {
		case m.switchedAt.IsZero():
			acts = append(acts, action{kind: actRecordSwitched, reason: "the previous CA has no switch time"})
		case !now.Before(m.switchedAt.Add(p.overlap)):
			acts = append(acts, action{kind: actDropPreviousCA, reason: fmt.Sprintf("every replica has served from the new CA since %s", m.switchedAt.UTC().Format(time.RFC3339))})
		default:
			wake = m.switchedAt.Add(p.overlap)
		}
	default:
		due := caRotationTime(m.ca.cert, p.overlap)
		if !now.Before(due) {
			acts = append(acts, action{kind: actStartCARotation, reason: fmt.Sprintf("the active CA expires at %s", m.ca.cert.NotAfter.UTC().Format(time.RFC3339))})
		} else {
			wake = due
		}
	}

	if !switched {
		if why := servingProblem(m, now, p.dnsNames); why != "" {
			acts = append(acts, action{kind: actIssueServing, reason: why})
		} else {
			wake = earliest(wake, renewalTime(m.serving.cert))
		}
	}
	if len(acts) > 0 {
		// Bundle patches follow the Secret as it will be written.
		return acts, time.Time{}
	}
	return syncActions(st.bundles, m.bundle()), wake
}

// caProblem says why the active CA cannot issue at now; "" when it can.
func caProblem(ca *keyPair, err error, now time.Time) string {
	switch {
	case err != nil:
		return "does not parse: " + err.Error()
	case ca == nil:
		return "is missing"
	}
	if why := usable(ca.cert, now, true); why != "" {
		return "is " + why
	}
	return ""
}

// servingProblem says why the serving certificate must be (re)issued now;
// "" when it is good until its renewal time.
func servingProblem(m *material, now time.Time, dnsNames []string) string {
	switch {
	case m.servingErr != nil:
		return "the serving certificate does not parse: " + m.servingErr.Error()
	case m.serving == nil:
		return "the serving certificate is missing"
	}
	if why := verifyServing(m.serving.cert, m.ca.cert, dnsNames, now); why != "" {
		return "the serving certificate " + why
	}
	if r := renewalTime(m.serving.cert); !now.Before(r) {
		return fmt.Sprintf("the serving certificate reached two thirds of its lifetime at %s", r.UTC().Format(time.RFC3339))
	}
	return ""
}

// bundlesMatch reports whether every observed caBundle equals want.
func bundlesMatch(bundles []webhookBundle, want []byte) bool {
	for _, b := range bundles {
		if !bytes.Equal(b.caBundle, want) {
			return false
		}
	}
	return true
}

// syncActions returns one actSyncBundle per configuration with a webhook
// whose caBundle differs from want, in the order first observed.
func syncActions(bundles []webhookBundle, want []byte) []action {
	var order []configRef
	stale := map[configRef][]string{}
	empty := map[configRef]bool{}
	for _, b := range bundles {
		if bytes.Equal(b.caBundle, want) {
			continue
		}
		if _, seen := stale[b.config]; !seen {
			order = append(order, b.config)
		}
		stale[b.config] = append(stale[b.config], b.webhook)
		empty[b.config] = empty[b.config] || len(b.caBundle) == 0
	}
	acts := make([]action, 0, len(order))
	for _, c := range order {
		names := stale[c]
		slices.Sort(names)
		what := "is out of date"
		if empty[c] {
			what = "is empty or out of date"
		}
		acts = append(acts, action{kind: actSyncBundle, config: c,
			reason: fmt.Sprintf("the caBundle of %s %s", strings.Join(names, ", "), what)})
	}
	return acts
}

// earliest is the earlier of two deadlines; zero means none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}
