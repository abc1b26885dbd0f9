package vmgen

import "math/rand/v2"

// Source supplies the generator's choices.
type Source interface {
	// Intn returns a number in [0, n); n is at least 1.
	Intn(n int) int
}

// NewSource returns the Source of case index of seed: the same seed and index
// always give the same Case, and each case is independent of the others, so
// one failing case reruns alone.
func NewSource(seed uint64, index int) Source {
	return randSource{rand.New(rand.NewPCG(seed, uint64(index)))}
}

type randSource struct{ r *rand.Rand }

func (s randSource) Intn(n int) int { return s.r.IntN(n) }

// BytesSource draws choices from b, for a fuzzer: each choice takes one byte
// (two when there are more than 256 options), and choices past the end of b
// are 0, the first option. Small changes to b change few choices.
func BytesSource(b []byte) Source { return &bytesSource{b: b} }

type bytesSource struct{ b []byte }

func (s *bytesSource) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	v := int(s.next())
	if n > 256 {
		v = v<<8 | int(s.next())
	}
	return v % n
}

func (s *bytesSource) next() byte {
	if len(s.b) == 0 {
		return 0
	}
	b := s.b[0]
	s.b = s.b[1:]
	return b
}
