package lifecycle

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// state is what the Controller keeps in memory, one small entry per VM it
// has looked at (so 10,000 VMs cost about a megabyte): the guest agent's
// last answer, the notice observe mode gives without writing it, and what
// the metrics count.
type state struct {
	mu  sync.Mutex
	vms map[types.NamespacedName]*vmState
}

type vmState struct {
	uid         types.UID
	guestAt     time.Time
	guestSource string
	// observedStopAt is observe mode's notice.
	observedStopAt time.Time
	phase          phase
	keepRunning    bool
}

// phase is what the metrics count a VM as.
type phase int

const (
	phaseOff phase = iota
	phaseRunning
	phaseIdle
	phasePending
	phaseStopped
)

type guestSeen struct {
	at     time.Time
	source string
}

func newState() *state { return &state{vms: map[types.NamespacedName]*vmState{}} }

func (s *state) entry(k types.NamespacedName) *vmState {
	e := s.vms[k]
	if e == nil {
		e = &vmState{}
		s.vms[k] = e
	}
	return e
}

func (s *state) forget(k types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.vms, k)
}

// guest is the guest agent's last report of users for the VMI of uid.
func (s *state) guest(k types.NamespacedName, uid types.UID) (guestSeen, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.vms[k]
	if e == nil || e.uid != uid || e.guestAt.IsZero() {
		return guestSeen{}, false
	}
	return guestSeen{at: e.guestAt, source: e.guestSource}, true
}

func (s *state) setGuest(k types.NamespacedName, uid types.UID, at time.Time, source string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(k)
	e.uid, e.guestAt, e.guestSource = uid, at, source
}

func (s *state) observedNotice(k types.NamespacedName) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e := s.vms[k]; e != nil {
		return e.observedStopAt
	}
	return time.Time{}
}

func (s *state) setObservedNotice(k types.NamespacedName, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entry(k).observedStopAt = at
}

// set records what the metrics count the VM as after d.
func (s *state) set(k types.NamespacedName, o Observation, d Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !o.Policy.Enabled() {
		if e := s.vms[k]; e != nil && e.guestAt.IsZero() && e.observedStopAt.IsZero() {
			delete(s.vms, k)
		} else if e != nil {
			e.phase, e.keepRunning = phaseOff, false
		}
		return
	}
	e := s.entry(k)
	e.keepRunning = o.Running && o.KeepRunningUntil.After(o.Now)
	switch {
	case !o.Running:
		e.phase = phaseStopped
	case d.Action == Notice || d.Action == Wait && !o.StopAt.IsZero():
		e.phase = phasePending
	case !d.Idle.IsZero() && !o.Now.Before(d.Idle):
		e.phase = phaseIdle
	default:
		e.phase = phaseRunning
	}
}

// counts is the number of VMs in each phase, and of keep-running leases.
func (s *state) counts() (byPhase map[phase]int, leases int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byPhase = map[phase]int{}
	for _, e := range s.vms {
		byPhase[e.phase]++
		if e.keepRunning {
			leases++
		}
	}
	return byPhase, leases
}

func joinNames(names []string, total int) string {
	s := strings.Join(names, ", ")
	if total > len(names) {
		s += fmt.Sprintf(" and %d more", total-len(names))
	}
	return s
}
