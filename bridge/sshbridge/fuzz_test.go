package sshbridge

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzParseHello feeds arbitrary bytes to ParseHello. It must not panic; an
// accepted message must satisfy every rule and parse back unchanged from
// its JSON form; a refused one wraps ErrBadHello and never quotes a secret
// field's value.
func FuzzParseHello(f *testing.F) {
	f.Add([]byte(`{"type":"ssh","user":"alice","privateKey":"-----BEGIN OPENSSH PRIVATE KEY-----\nAAAA\n-----END OPENSSH PRIVATE KEY-----\n","cols":120,"rows":40}`))
	f.Add([]byte(`{"user":"bob","password":"hunter22","passphrase":"x"}`))
	f.Add([]byte(`{"user":"u","password":"p","password":"p","cols":1e3}`))
	f.Add([]byte(`{"user":"u","Password":"hunter22\u0000"}`))
	f.Add([]byte(`{"user":"-x","password":"hunter22","rows":-1} trailing`))
	f.Add([]byte(`{"type":"ssh","user":"u@d","password":null,"privateKey":"-----BEGIN RSA PRIVATE KEY-----"}`))
	f.Add([]byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ParseHello(data)
		if err != nil {
			if !errors.Is(err, ErrBadHello) {
				t.Fatalf("error %v does not wrap ErrBadHello", err)
			}
			assertNoFieldSecret(t, data, err.Error())
			return
		}
		if validateUser(h.User) != nil || validateSize(h.Cols, h.Rows) != nil {
			t.Fatalf("accepted an invalid hello %v", h)
		}
		if (h.PrivateKey == "") == (h.Password == "") || (h.Passphrase != "" && h.PrivateKey == "") {
			t.Fatalf("accepted a hello with key %t, password %t, passphrase %t", h.PrivateKey != "", h.Password != "", h.Passphrase != "")
		}
		again, err := ParseHello(marshalHello(t, h))
		if err != nil || again != h {
			t.Fatalf("re-parsing the accepted hello gave %v, %v", again, err)
		}
	})
}

// FuzzParseControl feeds arbitrary bytes to ParseControl. It must not panic;
// an accepted resize is in range and parses back unchanged.
func FuzzParseControl(f *testing.F) {
	f.Add([]byte(`{"type":"resize","cols":80,"rows":24}`))
	f.Add([]byte(`{"type":"resize","cols":0,"rows":1001}`))
	f.Add([]byte(`{"type":"resize","cols":"80","rows":24,"x":1}`))
	f.Add([]byte(`{"type":"RESIZE","cols":80,"rows":24}{}`))
	f.Add([]byte("\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := ParseControl(data)
		if err != nil {
			if !errors.Is(err, ErrBadControl) {
				t.Fatalf("error %v does not wrap ErrBadControl", err)
			}
			return
		}
		if validateSize(r.Cols, r.Rows) != nil {
			t.Fatalf("accepted an out-of-range resize %+v", r)
		}
		b, err := json.Marshal(map[string]any{"type": "resize", "cols": r.Cols, "rows": r.Rows})
		if err != nil {
			t.Fatal(err)
		}
		if again, err := ParseControl(b); err != nil || again != r {
			t.Fatalf("re-parsing %s gave %+v, %v", b, again, err)
		}
	})
}

func marshalHello(t *testing.T, h Hello) []byte {
	t.Helper()
	m := map[string]any{"type": "ssh", "user": h.User, "cols": h.Cols, "rows": h.Rows}
	for k, v := range map[string]string{"privateKey": h.PrivateKey, "passphrase": h.Passphrase, "password": h.Password} {
		if v != "" {
			m[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixedErrors are ParseHello's messages for inputs without secrets; their
// fixed wording may contain a short secret by coincidence (a password "PRIVATE").
var fixedErrors = func() string {
	var all []string
	for _, in := range []string{
		``, `[`, `{} x`, `{"x":1}`, `{"user":1}`, `{"cols":"1"}`, `{"type":"x"}`, `{"user":"-"}`, `{"user":" "}`,
		`{"user":"u"}`, `{"user":"u","privateKey":"p","password":"p"}`, `{"user":"u","password":"p","passphrase":"p"}`,
		`{"user":"u","privateKey":"p"}`, `{"user":"u","password":"p","cols":-1}`, `{"user":"u","password":"p","rows":-1}`,
		`{"user":"u","user":"u"}`,
	} {
		_, err := ParseHello([]byte(in))
		all = append(all, err.Error())
	}
	return strings.Join(all, "\n")
}()

// assertNoFieldSecret checks that msg does not contain the value of a secret
// field of data (when data is loosely an object with string values). Values
// that also appear as a key, user or type, or in the fixed wording of an
// error, are skipped: errors may quote those.
func assertNoFieldSecret(t *testing.T, data []byte, msg string) {
	t.Helper()
	var m map[string]any
	if json.Unmarshal(data, &m) != nil {
		return
	}
	quotable := map[string]bool{}
	for k, v := range m {
		quotable[k] = true
		if s, ok := v.(string); ok && (k == "user" || k == "type") {
			quotable[s] = true
		}
	}
	for _, field := range []string{"privateKey", "passphrase", "password"} {
		s, ok := m[field].(string)
		if !ok || len(s) < 6 || quotable[s] || strings.Contains(fixedErrors, s) {
			continue
		}
		if strings.Contains(msg, s) {
			t.Fatalf("error %q contains the %s value %q", msg, field, s)
		}
	}
}
