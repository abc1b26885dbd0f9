package rfb

import (
	"maps"
	"slices"
	"strconv"
	"testing"
)

// BenchmarkServerTracker frames a FramebufferUpdate holding one of each
// 32-bit rectangle the tests know (but the largest), then a Bell, fed in
// chunks of a TCP segment and of a few bytes.
func BenchmarkServerTracker(b *testing.B) {
	cases := rectCases()
	var rects [][]byte
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		tc := cases[name]
		if tc.pf == pf32 && len(tc.rect) < 64<<10 && tc.want.Encoding != EncodingWMVi {
			rects = append(rects, tc.rect)
		}
	}
	data := cat(update(uint16(len(rects)), rects...), bell)
	for _, size := range []int{1400, 7} {
		chunks := chunked(data, size)
		b.Run("chunk="+strconv.Itoa(size), func(b *testing.B) {
			t := newNormalTracker(nil, pf32)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range chunks {
					if err := t.Feed(c, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkClientParser parses every client message the tests know, in
// chunks of a TCP segment and of a few bytes.
func BenchmarkClientParser(b *testing.B) {
	cases := clientMessages()
	var data []byte
	for _, name := range slices.Sorted(maps.Keys(cases)) {
		data = append(data, cases[name].raw...)
	}
	for _, size := range []int{1400, 7} {
		chunks := chunked(data, size)
		b.Run("chunk="+strconv.Itoa(size), func(b *testing.B) {
			p := newNormalClientParser(nil)
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				for _, c := range chunks {
					if err := p.Feed(c, nil); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
