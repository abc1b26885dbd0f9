package vnc

import (
	"slices"
	"testing"
)

func TestRewrite(t *testing.T) {
	// What noVNC 1.x sends: Tight and JPEG settings late in its list,
	// compression level 2, and its pseudo-encodings.
	noVNC := []int32{encRaw, encCopyRect, encHextile, encZRLE, encTight, -223, -308, -224, -258, -261, -23, -254}
	cases := map[string]struct {
		client []int32
		tier   Tier
		want   []int32
	}{
		"good keeps the client's list": {noVNC, Good, noVNC},
		"fair":                         {noVNC, Fair, []int32{encCopyRect, encTight, encZRLE, encHextile, encRaw, -223, -308, -224, -258, -261, -23, encCompressLevel0 + 6}},
		"poor":                         {noVNC, Poor, []int32{encCopyRect, encTight, encZRLE, encHextile, encRaw, -223, -308, -224, -258, -261, -23, encCompressLevel9}},
		"unknown encodings stay, after known ones": {[]int32{99, encRaw, encZlib}, Fair, []int32{encZlib, encRaw, 99, encCompressLevel0 + 6}},
		"no compact encoding offered":              {[]int32{encRaw}, Poor, []int32{encRaw, encCompressLevel9}},
		"empty":                                    {nil, Poor, []int32{encCompressLevel9}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Rewrite(tc.client, tc.tier)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("Rewrite = %v, want %v", got, tc.want)
			}
			// Every encoding the client listed survives, except its own
			// compression level when the tier sets one.
			for _, e := range tc.client {
				if !slices.Contains(got, e) && (!isCompressLevel(e) || tc.tier == Good) {
					t.Fatalf("Rewrite dropped the client's encoding %d", e)
				}
			}
		})
	}
}

func FuzzRewrite(f *testing.F) {
	f.Add([]byte{0, 1, 7, 16}, uint8(1))
	f.Fuzz(func(t *testing.T, raw []byte, tier uint8) {
		client := make([]int32, 0, len(raw)/4)
		for i := 0; i+4 <= len(raw) && len(client) < 64; i += 4 {
			client = append(client, int32(uint32(raw[i])<<24|uint32(raw[i+1])<<16|uint32(raw[i+2])<<8|uint32(raw[i+3])))
		}
		tr := Tier(tier % 3)
		got := Rewrite(client, tr)
		for _, e := range client {
			if !slices.Contains(got, e) && (!isCompressLevel(e) || tr == Good) {
				t.Fatalf("dropped %d", e)
			}
		}
		if len(got) > len(client)+1 {
			t.Fatalf("grew by more than the compression level: %d > %d+1", len(got), len(client))
		}
	})
}
