package virthandler

import "testing"

func FuzzDecodeRestartOptions(f *testing.F) {
	for _, seed := range []string{"", "{}", `{"gracePeriodSeconds":0}`, `{"gracePeriodSeconds":-1}`, "dryRun: [All]\n", "{", "\xff"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		opts, err := decodeRestartOptions(body)
		if err != nil {
			return
		}
		if opts == nil {
			t.Fatal("nil options without an error")
		}
		if g := opts.GracePeriodSeconds; g != nil && *g != 0 {
			t.Fatalf("accepted gracePeriodSeconds %d; only 0 is allowed", *g)
		}
	})
}
