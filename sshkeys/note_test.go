package sshkeys

import (
	"fmt"
	"strings"
	"testing"
)

func TestInvalidNote(t *testing.T) {
	pem := blocks[0].reason
	bad := wantFormat + ": ssh: no key found"
	for name, tc := range map[string]struct {
		lines []Invalid
		want  string
	}{
		"one line": {
			lines: []Invalid{{Secret: "s", Key: DataKey, Line: 3, Reason: bad}},
			want:  "1 line(s) skipped, the others still apply: data key authorized_keys line 3: " + bad,
		},
		// The finding: a pasted private key on line 2 and a bad line 9
		// showed as one Event naming only line 9.
		"a private key and a bad line both show": {
			lines: []Invalid{{Secret: "s", Key: DataKey, Line: 2, Reason: pem}, {Secret: "s", Key: DataKey, Line: 9, Reason: bad}},
			want:  "2 line(s) skipped, the others still apply: data key authorized_keys line 2: " + pem + "; data key authorized_keys line 9: " + bad,
		},
		"same reason and key share an entry": {
			lines: []Invalid{
				{Secret: "s", Key: DataKey, Line: 4, Reason: bad},
				{Secret: "s", Key: "extra", Line: 1, Reason: bad},
				{Secret: "s", Key: DataKey, Line: 7, Reason: bad},
			},
			want: "3 line(s) skipped, the others still apply: data key authorized_keys lines 4, 7: " + bad + "; data key extra line 1: " + bad,
		},
	} {
		t.Run(name, func(t *testing.T) {
			if got := InvalidNote(tc.lines); got != tc.want {
				t.Errorf("InvalidNote =\n%q\nwant\n%q", got, tc.want)
			}
		})
	}
}

// TestInvalidNoteFitsAnEvent: the API server rejects an Event whose note is
// longer than 1024 bytes, losing every line; a long list is cut short and
// says how many lines it left out.
func TestInvalidNoteFitsAnEvent(t *testing.T) {
	var lines []Invalid
	for i := range 200 {
		lines = append(lines, Invalid{Secret: "s", Key: DataKey, Line: i + 1, Reason: fmt.Sprintf("%s: reason %d", wantFormat, i)})
	}
	got := InvalidNote(lines)
	if len(got) > maxNoteLen {
		t.Fatalf("note is %d bytes, want at most %d", len(got), maxNoteLen)
	}
	if !strings.HasPrefix(got, "200 line(s) skipped") || !strings.Contains(got, "data key authorized_keys line 1: ") {
		t.Errorf("note %q does not start with the count and the first line", got)
	}
	shown := strings.Count(got, "data key ")
	if want := fmt.Sprintf("; and %d more line(s)", 200-shown); !strings.HasSuffix(got, want) {
		t.Errorf("note %q does not end with %q", got, want)
	}
}
