package sshkeys

import (
	"fmt"
	"strconv"
	"strings"
)

// maxNoteLen is the API server's limit on an events.k8s.io Event note
// (NoteLengthLimit): a longer note is rejected and the Event lost.
const maxNoteLen = 1024

// InvalidNote is the note of the one Warning Event a key Secret gets for its
// invalid lines. The events recorder merges Events that differ only in their
// note into one series showing a single note, so every invalid line of a
// Secret version goes into one note. Lines with the same data key and reason
// share an entry ("data key authorized_keys lines 9, 12: ..."), entries keep
// the order of their first line, and the note stays within maxNoteLen,
// saying how many lines it left out. lines must all be of one Secret.
func InvalidNote(lines []Invalid) string {
	type group struct {
		key, reason string
		lines       []int
	}
	var groups []*group
	byProblem := map[[2]string]*group{}
	for _, inv := range lines {
		k := [2]string{inv.Key, inv.Reason}
		g := byProblem[k]
		if g == nil {
			g = &group{key: inv.Key, reason: inv.Reason}
			byProblem[k] = g
			groups = append(groups, g)
		}
		g.lines = append(g.lines, inv.Line)
	}

	var b strings.Builder
	fmt.Fprintf(&b, "%d line(s) skipped, the others still apply: ", len(lines))
	shown := 0
	for i, g := range groups {
		entry := groupEntry(g.key, g.lines, g.reason)
		if i > 0 {
			entry = "; " + entry
		}
		// Every entry leaves room for the tail naming the lines after it.
		budget := maxNoteLen
		if i < len(groups)-1 {
			budget -= len(moreTail(len(lines) - shown - len(g.lines)))
		}
		if b.Len()+len(entry) > budget {
			b.WriteString(moreTail(len(lines) - shown))
			return truncate(b.String(), maxNoteLen)
		}
		b.WriteString(entry)
		shown += len(g.lines)
	}
	return b.String()
}

// moreTail ends a note that left n lines out.
func moreTail(n int) string { return fmt.Sprintf("; and %d more line(s)", n) }

// groupEntry is "data key K line(s) L1, L2: reason".
func groupEntry(key string, lines []int, reason string) string {
	nums := make([]string, len(lines))
	for i, n := range lines {
		nums[i] = strconv.Itoa(n)
	}
	word := "line"
	if len(lines) > 1 {
		word = "lines"
	}
	return fmt.Sprintf("data key %s %s %s: %s", key, word, strings.Join(nums, ", "), reason)
}

// truncate cuts s to at most n bytes on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}
