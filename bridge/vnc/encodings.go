package vnc

import "slices"

// RFB encodings the rewrite knows (RFC 6143 §7.7 and the community
// registry).
const (
	encRaw      int32 = 0
	encCopyRect int32 = 1
	encRRE      int32 = 2
	encHextile  int32 = 5
	encZlib     int32 = 6
	encTight    int32 = 7
	encZRLE     int32 = 16
	// encCompressLevel0..9 ask for a zlib level (Tight, Zlib, ZRLE).
	encCompressLevel0 int32 = -256
	encCompressLevel9 int32 = -247
)

// compactness ranks real encodings by how few bytes they send for a
// typical desktop, best first; CopyRect leads because it costs nothing.
var compactness = []int32{encCopyRect, encTight, encTightPNG, encZRLE, encZlib, encHextile, encRRE, encRaw}

// compressLevel is the zlib level each tier asks for; -1 keeps the
// client's choice.
var compressLevel = map[Tier]int32{Good: -1, Fair: 6, Poor: 9}

func isCompressLevel(e int32) bool { return e >= encCompressLevel0 && e <= encCompressLevel9 }

// encTightPNG is negative but a real encoding: QEMU sends it when listed.
const encTightPNG int32 = -260

// isPseudo tells pseudo-encodings (negative, or the large registered ranges)
// from real ones.
func isPseudo(e int32) bool { return e != encTightPNG && (e < 0 || e > 0xFFFF) }

// Rewrite returns the SetEncodings list to send for tier t given the
// client's own list. Good sends the client's list as it is. Fair and Poor
// put the client's most compact encodings first and replace its
// compression level. The result always carries every encoding the client
// listed, so QEMU, which resets its state on each SetEncodings, keeps
// every feature the client asked for.
func Rewrite(client []int32, t Tier) []int32 {
	level := compressLevel[t]
	if level < 0 {
		return slices.Clone(client)
	}
	var real, pseudo []int32
	for _, e := range client {
		switch {
		case isCompressLevel(e):
		case isPseudo(e):
			pseudo = append(pseudo, e)
		default:
			real = append(real, e)
		}
	}
	slices.SortStableFunc(real, func(a, b int32) int { return rank(a) - rank(b) })
	out := make([]int32, 0, len(real)+len(pseudo)+1)
	out = append(out, real...)
	out = append(out, pseudo...)
	return append(out, encCompressLevel0+level)
}

// rank orders known encodings by compactness and leaves unknown ones after
// them, in the client's order.
func rank(e int32) int {
	if i := slices.Index(compactness, e); i >= 0 {
		return i
	}
	return len(compactness)
}
