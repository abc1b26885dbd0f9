package sshkeys

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"

	"github.com/virtstation/virtstation/api"
)

// Invalid describes a key line that did not parse. It never holds the line
// itself: a line that fails to parse may be a pasted private key, and Invalid
// ends up in Events.
type Invalid struct {
	// Secret is the name of the key Secret.
	Secret string
	// Key is the data key within the Secret.
	Key string
	// Line is the 1-based line number within that data value.
	Line int
	// Reason says why the line is not an authorized_keys entry.
	Reason string
}

// wantFormat is the authorized_keys line format, for messages.
const wantFormat = "want [options] keytype base64-key [comment]"

// Collect parses every line of every data value of the key Secrets among
// secrets (those labelled virtstation.io/ssh-public-key=true; others are
// ignored) as an authorized_keys entry with ssh.ParseAuthorizedKey. DataKey is
// the documented data key, but every data key is read.
//
// Blank lines and # comments are skipped. Lines that do not parse are
// reported in invalid and left out of keys; a PEM or RFC 4716 block (a pasted
// private key, or a PuTTY export) is reported once, at its first line.
//
// Each key comes back normalized: its options (kept as written, since they
// may restrict what the key can do), the key as ssh.MarshalAuthorizedKey
// writes it, and its comment. A key that appears again with the same options
// is dropped, whatever its comment. Keys are ordered by Secret name, then data
// key, then line, so the result depends only on the Secrets' contents.
func Collect(secrets []corev1.Secret) (keys []string, invalid []Invalid) {
	var sources []*corev1.Secret
	for i := range secrets {
		if isKeySecret(&secrets[i]) {
			sources = append(sources, &secrets[i])
		}
	}
	slices.SortStableFunc(sources, func(a, b *corev1.Secret) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Namespace, b.Namespace)
	})

	seen := map[string]bool{}
	for _, s := range sources {
		for _, dataKey := range slices.Sorted(maps.Keys(s.Data)) {
			entries, bad := parseValue(s.Data[dataKey])
			for _, e := range entries {
				if !seen[e.identity] {
					seen[e.identity] = true
					keys = append(keys, e.line)
				}
			}
			for _, b := range bad {
				invalid = append(invalid, Invalid{Secret: s.Name, Key: dataKey, Line: b.line, Reason: b.reason})
			}
		}
	}
	return keys, invalid
}

// isKeySecret reports whether s is a source of SSH public keys.
func isKeySecret(s *corev1.Secret) bool {
	return s.Labels[api.LabelSSHPublicKey] == api.LabelTrue
}

// entry is one parsed key line.
type entry struct {
	// line is the normalized authorized_keys line.
	line string
	// identity is line without the comment: two entries with the same
	// identity grant the same access.
	identity string
}

// badLine is a line that did not parse.
type badLine struct {
	line   int
	reason string
}

// block is a multi-line format someone may paste instead of a key line.
type block struct {
	begin, end string
	reason     string
}

// blocks are reported once and skipped up to and including their end line.
var blocks = []block{
	{
		begin:  "-----BEGIN ",
		end:    "-----END ",
		reason: "a PEM block (a private key?) is not an authorized_keys line: put only public keys here (ssh-keygen -y -f KEY prints one); the block is skipped",
	},
	{
		begin:  "---- BEGIN SSH2 PUBLIC KEY ----",
		end:    "---- END SSH2 PUBLIC KEY ----",
		reason: "an RFC 4716 (SSH2) public key block is not an authorized_keys line: convert it with ssh-keygen -i -f KEY; the block is skipped",
	},
}

// parseValue parses one data value, line by line.
func parseValue(value []byte) (entries []entry, bad []badLine) {
	var inBlock *block
	for n, raw := range bytes.Split(value, []byte("\n")) {
		lineNo := n + 1
		text := strings.TrimSpace(string(raw))
		if inBlock != nil {
			if strings.HasPrefix(text, inBlock.end) {
				inBlock = nil
			}
			continue
		}
		if text == "" || text[0] == '#' {
			continue
		}
		e, err := parseLine(raw)
		if err == nil {
			entries = append(entries, e)
			continue
		}
		if b := blockAt(text); b != nil {
			bad = append(bad, badLine{line: lineNo, reason: b.reason})
			inBlock = b
			continue
		}
		bad = append(bad, badLine{line: lineNo, reason: err.Error()})
	}
	return entries, bad
}

// blockAt returns the block that starts at a line, or nil.
func blockAt(text string) *block {
	for i := range blocks {
		if strings.HasPrefix(text, blocks[i].begin) {
			return &blocks[i]
		}
	}
	return nil
}

// parseLine parses a single line (no newline) with ssh.ParseAuthorizedKey and
// normalizes it.
func parseLine(line []byte) (entry, error) {
	key, comment, options, _, err := ssh.ParseAuthorizedKey(line)
	if err != nil {
		// ParseAuthorizedKey wraps the last parse error, if any, in a
		// generic "no key found"; the wrapped one says more.
		if detail := errors.Unwrap(err); detail != nil {
			return entry{}, errors.New(wantFormat + ": " + detail.Error())
		}
		return entry{}, errors.New(wantFormat)
	}
	identity := strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(key)), "\n")
	if len(options) > 0 {
		identity = strings.Join(options, ",") + " " + identity
	}
	// A comment can end in carriage returns ParseAuthorizedKey keeps; they
	// would make the rendered file differ from what it parses back to.
	comment = strings.TrimRight(comment, " \t\r")
	if comment == "" {
		return entry{line: identity, identity: identity}, nil
	}
	return entry{line: identity + " " + comment, identity: identity}, nil
}
