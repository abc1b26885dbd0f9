package sshkeys

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"reflect"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/virtstation/virtstation/api"
)

// testKeys are generated once per test binary: RSA generation is slow.
var testKeys = sync.OnceValue(func() map[string]string {
	ed, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	ed2, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	rk, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return map[string]string{
		"ed25519":  authorizedLine(ed),
		"ed25519b": authorizedLine(ed2),
		"rsa":      authorizedLine(rk.Public()),
		"ecdsa":    authorizedLine(ec.Public()),
	}
})

// authorizedLine is "type base64" for a public key, as MarshalAuthorizedKey
// writes it without the newline.
func authorizedLine(pub crypto.PublicKey) string {
	k, err := ssh.NewPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return strings.TrimSuffix(string(ssh.MarshalAuthorizedKey(k)), "\n")
}

// keySecret is a key Secret named name with the given data.
func keySecret(name string, data map[string]string) corev1.Secret {
	s := plainSecret(name, data)
	s.Labels = map[string]string{api.LabelSSHPublicKey: api.LabelTrue}
	return s
}

// plainSecret is an unlabelled Secret named name with the given data.
func plainSecret(name string, data map[string]string) corev1.Secret {
	s := corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

// invalidAt is the Invalid Collect reports for a line that does not parse;
// the detail after wantFormat comes from x/crypto/ssh and is not compared.
func invalidAt(secret, key string, line int) Invalid {
	return Invalid{Secret: secret, Key: key, Line: line, Reason: wantFormat}
}

// blockAtLine is the Invalid Collect reports for a PEM or RFC 4716 block.
func blockAtLine(secret, key string, line int, b block) Invalid {
	return Invalid{Secret: secret, Key: key, Line: line, Reason: b.reason}
}

func TestCollect(t *testing.T) {
	k := testKeys()
	ed, ed2, rsaKey, ec := k["ed25519"], k["ed25519b"], k["rsa"], k["ecdsa"]
	edBlob := strings.Fields(ed)[1]
	pem := blocks[0]
	ssh2 := blocks[1]

	cases := map[string]struct {
		secrets []corev1.Secret
		keys    []string
		invalid []Invalid
	}{
		"no secrets": {},
		"rsa, ed25519 and ecdsa with comments kept": {
			secrets: []corev1.Secret{keySecret("team", map[string]string{
				DataKey: rsaKey + " alice@laptop\n" + ed + " bob with spaces\n" + ec + "\n",
			})},
			keys: []string{rsaKey + " alice@laptop", ed + " bob with spaces", ec},
		},
		"blank lines and comments are skipped": {
			secrets: []corev1.Secret{keySecret("team", map[string]string{
				DataKey: "# team keys\n\n   \n\t# indented comment\n" + ed + "\n\n",
			})},
			keys: []string{ed},
		},
		"whitespace and CRLF are normalized": {
			secrets: []corev1.Secret{keySecret("team", map[string]string{
				DataKey: "  " + strings.Replace(ed, " ", "\t", 1) + "  \t carol  \r\n" + ec + "\r\n",
			})},
			keys: []string{ed + " carol", ec},
		},
		"options are kept": {
			secrets: []corev1.Secret{keySecret("team", map[string]string{
				DataKey: "no-pty " + ed + " dave\n" + `command="echo hi there",no-port-forwarding ` + ec + "\n",
			})},
			keys: []string{"no-pty " + ed + " dave", `command="echo hi there",no-port-forwarding ` + ec},
		},
		"invalid lines are reported with their line numbers": {
			secrets: []corev1.Secret{keySecret("team", map[string]string{
				DataKey: "not a key\n" + ed + "\nssh-ed25519 AAAA-not-base64 x\nssh-rsa " + edBlob + " type mismatch\nlonelytoken\n",
			})},
			keys: []string{ed},
			invalid: []Invalid{
				invalidAt("team", DataKey, 1),
				invalidAt("team", DataKey, 3),
				invalidAt("team", DataKey, 4),
				invalidAt("team", DataKey, 5),
			},
		},
		"a pasted private key is reported once and skipped": {
			secrets: []corev1.Secret{keySecret("team", map[string]string{
				DataKey: ed + "\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAABG5vbmUAAAAEbm9uZQ==\n-----END OPENSSH PRIVATE KEY-----\n" + ec + "\n",
			})},
			keys:    []string{ed, ec},
			invalid: []Invalid{blockAtLine("team", DataKey, 2, pem)},
		},
		"an RFC 4716 block is reported once and skipped": {
			secrets: []corev1.Secret{keySecret("team", map[string]string{
				DataKey: "---- BEGIN SSH2 PUBLIC KEY ----\nComment: \"x\"\n" + edBlob + "\n---- END SSH2 PUBLIC KEY ----\n" + ec,
			})},
			keys:    []string{ec},
			invalid: []Invalid{blockAtLine("team", DataKey, 1, ssh2)},
		},
		"duplicates are removed, first one wins": {
			secrets: []corev1.Secret{
				keySecret("b-second", map[string]string{DataKey: ed + " later\n" + ed2}),
				keySecret("a-first", map[string]string{DataKey: ed + " first\n" + ed + " again\n"}),
			},
			keys: []string{ed + " first", ed2},
		},
		"the same key with other options is kept": {
			secrets: []corev1.Secret{keySecret("team", map[string]string{
				DataKey: ed + "\n" + `from="10.0.0.0/8" ` + ed + "\n",
			})},
			keys: []string{ed, `from="10.0.0.0/8" ` + ed},
		},
		"unlabelled secrets are ignored": {
			secrets: []corev1.Secret{
				plainSecret("plain", map[string]string{DataKey: ed}),
				func() corev1.Secret {
					s := keySecret("off", map[string]string{DataKey: rsaKey})
					s.Labels[api.LabelSSHPublicKey] = "false"
					return s
				}(),
				keySecret("on", map[string]string{DataKey: ec}),
			},
			keys: []string{ec},
		},
		"every data key is read, in key order": {
			secrets: []corev1.Secret{keySecret("team", map[string]string{
				"zed.pub": ed2,
				DataKey:   ed,
				"bob.pub": "junk junk\n" + ec,
			})},
			keys:    []string{ed, ec, ed2},
			invalid: []Invalid{invalidAt("team", "bob.pub", 1)},
		},
		"order is by secret name, then line": {
			secrets: []corev1.Secret{
				keySecret("zz", map[string]string{DataKey: rsaKey}),
				keySecret("aa", map[string]string{DataKey: ec + "\n" + ed}),
			},
			keys: []string{ec, ed, rsaKey},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			keys, invalid := Collect(tc.secrets)
			if !reflect.DeepEqual(keys, tc.keys) {
				t.Errorf("keys:\n got %q\nwant %q", keys, tc.keys)
			}
			if !equalInvalid(invalid, tc.invalid) {
				t.Errorf("invalid:\n got %+v\nwant %+v", invalid, tc.invalid)
			}
		})
	}
}

// equalInvalid compares Invalid lists; a wanted Reason of wantFormat matches
// any reason that starts with it.
func equalInvalid(got, want []Invalid) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if w.Reason == wantFormat && strings.HasPrefix(g.Reason, wantFormat) {
			g.Reason = wantFormat
		}
		if g != w {
			return false
		}
	}
	return true
}

func TestCollectIgnoresInputOrder(t *testing.T) {
	k := testKeys()
	secrets := []corev1.Secret{
		keySecret("c", map[string]string{DataKey: k["rsa"] + "\n" + k["ed25519"] + " c"}),
		keySecret("a", map[string]string{DataKey: k["ed25519"] + " a\nbad line", "x": k["ecdsa"]}),
		keySecret("b", map[string]string{DataKey: k["ed25519b"]}),
	}
	wantKeys, wantInvalid := Collect(secrets)
	perms := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, p := range perms {
		in := []corev1.Secret{secrets[p[0]], secrets[p[1]], secrets[p[2]]}
		keys, invalid := Collect(in)
		if !reflect.DeepEqual(keys, wantKeys) || !reflect.DeepEqual(invalid, wantInvalid) {
			t.Fatalf("order %v: got %q %+v, want %q %+v", p, keys, invalid, wantKeys, wantInvalid)
		}
	}
}

func TestCollectNeverEchoesTheLine(t *testing.T) {
	const secretish = "-----BEGIN RSA PRIVATE KEY----- hunter2"
	_, invalid := Collect([]corev1.Secret{keySecret("s", map[string]string{DataKey: "hunter2 hunter2 hunter2\n" + secretish})})
	if len(invalid) != 2 {
		t.Fatalf("invalid = %+v, want 2 entries", invalid)
	}
	for _, inv := range invalid {
		if strings.Contains(inv.Reason, "hunter2") {
			t.Errorf("reason %q repeats the line's content", inv.Reason)
		}
	}
}

func TestRender(t *testing.T) {
	cases := map[string]struct {
		keys []string
		want string
	}{
		"none": {keys: nil, want: ""},
		"one":  {keys: []string{"ssh-ed25519 AAAA a"}, want: "ssh-ed25519 AAAA a\n"},
		"two":  {keys: []string{"ssh-ed25519 AAAA a", "ssh-rsa BBBB"}, want: "ssh-ed25519 AAAA a\nssh-rsa BBBB\n"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Render(tc.keys)
			if string(got) != tc.want {
				t.Errorf("Render(%q) = %q, want %q", tc.keys, got, tc.want)
			}
			if got == nil {
				t.Error("Render returned nil; want an empty, non-nil value so the data key is written")
			}
		})
	}
}

func TestRenderRoundTrips(t *testing.T) {
	k := testKeys()
	keys, _ := Collect([]corev1.Secret{keySecret("s", map[string]string{
		DataKey: "no-pty,command=\"a b\" " + k["ed25519"] + " c d\n" + k["rsa"] + "\n" + k["ecdsa"] + " e\r\n",
	})})
	again, invalid := Collect([]corev1.Secret{keySecret("s", map[string]string{DataKey: string(Render(keys))})})
	if !reflect.DeepEqual(again, keys) || len(invalid) != 0 {
		t.Fatalf("Collect(Render(keys)) = %q %+v, want %q", again, invalid, keys)
	}
}
