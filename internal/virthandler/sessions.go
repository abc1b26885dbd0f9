package virthandler

import (
	"context"
	"sync"
)

// connKey names the one console or VNC connection a VMI may have.
type connKey struct {
	namespace, name string
	kind            Kind
}

// conn is one piped connection; stop ends it.
type conn struct {
	stop context.CancelFunc
}

// sessions tracks piped connections as virt-handler does: per VMI and kind,
// the newest connection is current and displaces the one before. Safe for
// concurrent use.
type sessions struct {
	mu      sync.Mutex
	current map[connKey]*conn
	live    map[connKey]map[*conn]struct{} // current plus displaced ones still closing
}

func newSessions() *sessions {
	return &sessions{current: map[connKey]*conn{}, live: map[connKey]map[*conn]struct{}{}}
}

// admit makes c the current connection for k. With preserve it refuses
// (ok false) while another connection is current, as virt-handler answers
// preserveSession=true; otherwise it returns the connection c displaces, for
// the caller to stop.
func (s *sessions) admit(k connKey, c *conn, preserve bool) (displaced *conn, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	displaced = s.current[k]
	if displaced != nil && preserve {
		return nil, false
	}
	s.current[k] = c
	if s.live[k] == nil {
		s.live[k] = map[*conn]struct{}{}
	}
	s.live[k][c] = struct{}{}
	return displaced, true
}

// done forgets c once its pipe has ended.
func (s *sessions) done(k connKey, c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.current[k] == c {
		delete(s.current, k)
	}
	delete(s.live[k], c)
	if len(s.live[k]) == 0 {
		delete(s.live, k)
	}
}

// open counts the connections for k whose pipes have not ended.
func (s *sessions) open(k connKey) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.live[k])
}

// stopVMI stops every connection of one VMI.
func (s *sessions) stopVMI(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, conns := range s.live {
		if k.namespace == namespace && k.name == name {
			for c := range conns {
				c.stop()
			}
		}
	}
}
