package relay

import (
	"reflect"
	"slices"
	"sync"
)

// watchShardSize is how many channels one watcher goroutine waits on. A
// change to a shard's set re-runs its select, which costs a pass over the
// set: small shards keep that cheap, and 2,000 sessions still take only
// 16 goroutines between them instead of one each.
const watchShardSize = 128

// watchers waits for the Lost channels of every running session.
var watchers watchSet

// afterClose calls f on a goroutine of its own once ch is closed, unless
// stop is called first. stop reports whether it stopped the call. It is
// context.AfterFunc for a plain channel: the channel is waited on by a
// goroutine shared with other channels, not one of its own.
func afterClose(ch <-chan struct{}, f func()) (stop func() bool) {
	e := &watchEntry{ch: ch, f: f}
	watchers.add(e)
	return func() bool { return watchers.remove(e) }
}

// watchSet is the shards of watched channels. Each shard's goroutine runs
// while the shard watches something.
type watchSet struct {
	mu     sync.Mutex
	shards []*watchShard
}

// watchShard is one goroutine's set of channels.
type watchShard struct {
	// wake tells the goroutine that entries changed.
	wake chan struct{}
	// entries is guarded by watchSet.mu.
	entries []*watchEntry
}

// watchEntry is one watched channel; shard is nil once it fired or was
// stopped (guarded by watchSet.mu).
type watchEntry struct {
	ch    <-chan struct{}
	f     func()
	shard *watchShard
}

func (s *watchSet) add(e *watchEntry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.shards, func(sh *watchShard) bool { return len(sh.entries) < watchShardSize })
	if i < 0 {
		sh := &watchShard{wake: make(chan struct{}, 1)}
		s.shards = append(s.shards, sh)
		go s.run(sh)
		i = len(s.shards) - 1
	}
	sh := s.shards[i]
	e.shard = sh
	sh.entries = append(sh.entries, e)
	sh.poke()
}

// remove takes e out of its shard; false when it was out already.
func (s *watchSet) remove(e *watchEntry) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	sh := e.shard
	if sh == nil {
		return false
	}
	e.shard = nil
	i := slices.Index(sh.entries, e)
	last := len(sh.entries) - 1
	sh.entries[i], sh.entries[last] = sh.entries[last], nil
	sh.entries = sh.entries[:last]
	sh.poke()
	return true
}

func (sh *watchShard) poke() {
	select {
	case sh.wake <- struct{}{}:
	default:
	}
}

// run waits on sh's channels until sh watches none.
func (s *watchSet) run(sh *watchShard) {
	cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(sh.wake)}}
	var watched []*watchEntry
	for {
		s.mu.Lock()
		if len(sh.entries) == 0 {
			s.shards = slices.DeleteFunc(s.shards, func(x *watchShard) bool { return x == sh })
			s.mu.Unlock()
			return
		}
		watched = append(watched[:0], sh.entries...)
		s.mu.Unlock()
		clear(cases[1:])
		cases = cases[:1]
		for _, e := range watched {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(e.ch)})
		}
		i, _, _ := reflect.Select(cases)
		if i == 0 {
			continue
		}
		if e := watched[i-1]; s.remove(e) {
			go e.f()
		}
	}
}
