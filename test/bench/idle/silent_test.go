package idle_test

import (
	"errors"
	"io"
	"net"
	"sync"
)

// silentSource accepts connections and never sends a byte: the display of
// a VM nobody looks at, as far as a proxy can tell before the RFB
// handshake. It reads and discards what arrives, to see each connection
// end. Safe for concurrent use.
type silentSource struct {
	ln   net.Listener
	addr string

	mu       sync.Mutex
	conns    map[net.Conn]struct{}
	accepted int
	wg       sync.WaitGroup
}

// listenSilent listens on network ("unix" or "tcp") at addr.
func listenSilent(network, addr string) (*silentSource, error) {
	ln, err := net.Listen(network, addr)
	if err != nil {
		return nil, err
	}
	s := &silentSource{ln: ln, addr: ln.Addr().String(), conns: map[net.Conn]struct{}{}}
	s.wg.Go(s.serve)
	return s, nil
}

func (s *silentSource) serve() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.accepted++
		s.mu.Unlock()
		s.wg.Go(func() {
			_, _ = io.Copy(io.Discard, c)
			_ = c.Close()
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		})
	}
}

// counts reports the connections open now and accepted so far.
func (s *silentSource) counts() (open, accepted int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns), s.accepted
}

// Close stops listening, ends every connection and waits for them.
func (s *silentSource) Close() error {
	err := s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		_ = c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}
