package sshd

import (
	"strings"
	"testing"
)

func TestRenderConfig(t *testing.T) {
	tests := map[string]struct {
		params configParams
		want   []string
	}{
		"password on": {
			params: configParams{Port: 2222, HostKey: "/d/hk", PidFile: "/d/pid", AuthorizedKeys: "/d/ak", Password: true},
			want:   []string{"ListenAddress 127.0.0.1:2222", "HostKey /d/hk", "PidFile /d/pid", "AuthorizedKeysFile /d/ak", "AllowUsers vstest", "PasswordAuthentication yes", "UsePAM no", "StrictModes no"},
		},
		"password off": {
			params: configParams{Port: 1, Password: false},
			want:   []string{"ListenAddress 127.0.0.1:1", "PasswordAuthentication no"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			lines := strings.Split(renderConfig(tc.params), "\n")
			for _, w := range tc.want {
				found := false
				for _, l := range lines {
					found = found || l == w
				}
				if !found {
					t.Errorf("config lacks %q:\n%s", w, strings.Join(lines, "\n"))
				}
			}
		})
	}
}
