package bridge

import (
	"net/http/httptest"
	"testing"
)

func TestSessionQueryFlags(t *testing.T) {
	cases := map[string]struct {
		query              string
		viewOnly, adaptive bool
	}{
		"absent":                {query: "", viewOnly: false, adaptive: true},
		"noVNC's view_only=1":   {query: "?view_only=1", viewOnly: true, adaptive: true},
		"view_only=true":        {query: "?view_only=true", viewOnly: true, adaptive: true},
		"view_only=0":           {query: "?view_only=0", viewOnly: false, adaptive: true},
		"junk is not view only": {query: "?view_only=please", viewOnly: false, adaptive: true},
		"empty is not":          {query: "?view_only=", viewOnly: false, adaptive: true},
		"adaptive off":          {query: "?adaptive=off&view_only=yes", viewOnly: true, adaptive: false},
		"adaptive junk":         {query: "?adaptive=maybe", viewOnly: false, adaptive: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest("GET", "/api/v1/namespaces/ns/virtualmachines/vm/vnc"+tc.query, nil)
			if got := viewOnlyAsked(r); got != tc.viewOnly {
				t.Errorf("viewOnlyAsked = %v, want %v", got, tc.viewOnly)
			}
			if got := adaptive(r, true); got != tc.adaptive {
				t.Errorf("adaptive = %v, want %v", got, tc.adaptive)
			}
		})
	}
}
