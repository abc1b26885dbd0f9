package sshkeys

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
)

// FuzzCollect feeds arbitrary Secret data to Collect. It must not panic;
// every key it returns must parse back as one authorized_keys line; Collect
// of the rendered keys must return them unchanged; and every Invalid must
// point at a line that exists; each Secret's InvalidNote fits an Event.
func FuzzCollect(f *testing.F) {
	k := testKeys()
	f.Add([]byte(k["ed25519"]+" alice\n"+k["rsa"]), []byte(k["ecdsa"]))
	f.Add([]byte("no-pty,command=\"echo a b\" "+k["ed25519"]+" c\r\n# x\n\n"), []byte("junk\n"))
	f.Add([]byte("-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n"+k["ecdsa"]), []byte{})
	f.Add([]byte("---- BEGIN SSH2 PUBLIC KEY ----\nAAAA\n"), []byte(","+k["ed25519"]))
	f.Add([]byte("ssh-rsa "+strings.Fields(k["ed25519"])[1]), []byte("\x00\xff\n\r\r"))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		secrets := []corev1.Secret{
			keySecret("one", map[string]string{DataKey: string(a), "b": string(b)}),
			keySecret("two", map[string]string{DataKey: string(b)}),
		}
		keys, invalid := Collect(secrets)
		seen := map[string]bool{}
		for _, key := range keys {
			if strings.ContainsAny(key, "\n") || seen[key] {
				t.Fatalf("key %q has a newline or repeats", key)
			}
			seen[key] = true
			if _, _, _, rest, err := ssh.ParseAuthorizedKey([]byte(key)); err != nil || len(rest) != 0 {
				t.Fatalf("key %q does not parse back: %v (rest %q)", key, err, rest)
			}
		}
		again, bad := Collect([]corev1.Secret{keySecret("r", map[string]string{DataKey: string(Render(keys))})})
		if len(bad) != 0 || !reflect.DeepEqual(again, keys) {
			t.Fatalf("Collect(Render(keys)) = %q %+v, want %q", again, bad, keys)
		}
		lines := map[string]int{"one/" + DataKey: len(strings.Split(string(a), "\n")), "one/b": len(strings.Split(string(b), "\n")), "two/" + DataKey: len(strings.Split(string(b), "\n"))}
		bySecret := map[string][]Invalid{}
		for _, inv := range invalid {
			if n := lines[inv.Secret+"/"+inv.Key]; inv.Line < 1 || inv.Line > n || inv.Reason == "" {
				t.Fatalf("invalid %+v points outside its value (%d lines)", inv, n)
			}
			bySecret[inv.Secret] = append(bySecret[inv.Secret], inv)
		}
		for _, list := range bySecret {
			note := InvalidNote(list)
			if len(note) > maxNoteLen || !utf8.ValidString(note) || !strings.HasPrefix(note, fmt.Sprintf("%d line(s) skipped", len(list))) {
				t.Fatalf("note %q (%d bytes) for %d lines: too long, not UTF-8, or without the count", note, len(note), len(list))
			}
		}
	})
}
