package sshbridge

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// Markers that must never show up in an error or a formatted Hello.
const (
	testPassword   = "pw-SECRET-7f3a"
	testPassphrase = "pp-SECRET-91c2"
	testPEM        = "-----BEGIN OPENSSH PRIVATE KEY-----\nkey-SECRET-b64b\n-----END OPENSSH PRIVATE KEY-----\n"
)

var secrets = []string{testPassword, testPassphrase, "key-SECRET"}

// badHello builds the error ParseHello returns for a rule, as the code does.
func badHello(reason string) string {
	return fmt.Errorf("%w: %w", ErrBadHello, errors.New(reason)).Error()
}

func TestParseHello(t *testing.T) {
	pem := fmt.Sprintf("%q", testPEM)
	huge := `{"user":"u","password":"` + strings.Repeat("x", MaxHelloBytes) + `"}`
	tests := map[string]struct {
		in      string
		want    Hello
		wantErr string
	}{
		"key with size": {
			in:   `{"type":"ssh","user":"alice","privateKey":` + pem + `,"cols":120,"rows":40}`,
			want: Hello{User: "alice", PrivateKey: testPEM, Cols: 120, Rows: 40},
		},
		"key with passphrase": {
			in:   `{"type":"ssh","user":"alice","privateKey":` + pem + `,"passphrase":"` + testPassphrase + `"}`,
			want: Hello{User: "alice", PrivateKey: testPEM, Passphrase: testPassphrase, Cols: 80, Rows: 24},
		},
		"password, default size, no type": {
			in:   `{"user":"bob.smith@corp","password":"` + testPassword + `"}`,
			want: Hello{User: "bob.smith@corp", Password: testPassword, Cols: DefaultCols, Rows: DefaultRows},
		},
		"null and empty secrets count as absent": {
			in:   `{"type":"ssh","user":"u","password":"` + testPassword + `","privateKey":null,"passphrase":"","cols":0,"rows":null}`,
			want: Hello{User: "u", Password: testPassword, Cols: 80, Rows: 24},
		},
		"largest size": {
			in:   `{"user":"u","password":"` + testPassword + `","cols":1000,"rows":1}`,
			want: Hello{User: "u", Password: testPassword, Cols: 1000, Rows: 1},
		},
		"wrong type": {
			in:      `{"type":"vnc","user":"u","password":"` + testPassword + `"}`,
			wantErr: badHello(`type must be "ssh", got "vnc"`),
		},
		"no user": {
			in:      `{"type":"ssh","password":"` + testPassword + `"}`,
			wantErr: badHello("user is required"),
		},
		"user with a space": {
			in:      `{"user":"a b","password":"` + testPassword + `"}`,
			wantErr: badHello(`user "a b" may contain only letters, digits, '.', '_', '-' and '@'`),
		},
		"user like an option": {
			in:      `{"user":"-oProxyCommand","password":"` + testPassword + `"}`,
			wantErr: badHello(`user "-oProxyCommand" must not start with '-'`),
		},
		"user too long": {
			in:      `{"user":"` + strings.Repeat("a", 65) + `","password":"` + testPassword + `"}`,
			wantErr: badHello("user is 65 bytes long, more than 64"),
		},
		"both secrets": {
			in:      `{"user":"u","password":"` + testPassword + `","privateKey":` + pem + `}`,
			wantErr: badHello("send either privateKey or password, not both"),
		},
		"no secret": {
			in:      `{"user":"u","cols":80}`,
			wantErr: badHello("send privateKey or password"),
		},
		"passphrase without key": {
			in:      `{"user":"u","password":"` + testPassword + `","passphrase":"` + testPassphrase + `"}`,
			wantErr: badHello("passphrase goes with privateKey, which is missing"),
		},
		"public key instead of private": {
			in:      `{"user":"u","privateKey":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIkey-SECRET"}`,
			wantErr: badHello("privateKey must be a PEM private key (-----BEGIN ... PRIVATE KEY-----), such as the content of ~/.ssh/id_ed25519"),
		},
		"cols too large": {
			in:      `{"user":"u","password":"` + testPassword + `","cols":1001}`,
			wantErr: badHello("cols must be between 1 and 1000, got 1001"),
		},
		"negative rows": {
			in:      `{"user":"u","password":"` + testPassword + `","rows":-3}`,
			wantErr: badHello("rows must be between 1 and 1000, got -3"),
		},
		"fractional cols": {
			in:      `{"user":"u","password":"` + testPassword + `","cols":80.5}`,
			wantErr: badHello(`field "cols" must be an integer`),
		},
		"password as a number": {
			in:      `{"user":"u","password":12345678}`,
			wantErr: badHello(`field "password" must be a string`),
		},
		"unknown field": {
			in:      `{"user":"u","password":"` + testPassword + `","private_key":"x"}`,
			wantErr: badHello(`unknown field "private_key"`),
		},
		"keys match exactly": {
			in:      `{"user":"u","Password":"` + testPassword + `"}`,
			wantErr: badHello(`unknown field "Password"`),
		},
		"repeated field": {
			in:      `{"user":"u","password":"` + testPassword + `","password":"` + testPassword + `"}`,
			wantErr: badHello(`field "password" appears twice`),
		},
		"not an object": {
			in:      `["` + testPassword + `"]`,
			wantErr: badHello("the message must be a JSON object"),
		},
		"trailing data": {
			in:      `{"user":"u","password":"` + testPassword + `"} {}`,
			wantErr: badHello("unexpected data after the JSON object"),
		},
		"syntax error inside a secret": {
			in:      `{"user":"u","password":"` + testPassword + `\q"}`,
			wantErr: badHello("not valid JSON (at byte 36)"),
		},
		"truncated": {
			in:      `{"user":"u","password":"` + testPassword,
			wantErr: badHello("not valid JSON (truncated)"),
		},
		"empty": {
			in:      ``,
			wantErr: badHello("not valid JSON (truncated)"),
		},
		"too large": {
			in:      huge,
			wantErr: badHello(fmt.Sprintf("the message is %d bytes, more than the %d allowed", len(huge), MaxHelloBytes)),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseHello([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, ErrBadHello) {
					t.Fatalf("error = %v, want %q (wrapping ErrBadHello)", err, tc.wantErr)
				}
				if got != (Hello{}) {
					t.Fatalf("a failed parse returned %#v", got)
				}
				assertNoSecret(t, err.Error())
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if got != tc.want {
				t.Fatalf("got %+v (user %q, key %t, pass %t, pw %t), want %+v", got, got.User, got.PrivateKey == tc.want.PrivateKey, got.Passphrase == tc.want.Passphrase, got.Password == tc.want.Password, tc.want)
			}
		})
	}
}

func TestParseControl(t *testing.T) {
	bad := func(reason string) string { return fmt.Errorf("%w: %w", ErrBadControl, errors.New(reason)).Error() }
	tests := map[string]struct {
		in      string
		want    Resize
		wantErr string
	}{
		"resize":          {in: `{"type":"resize","cols":132,"rows":43}`, want: Resize{Cols: 132, Rows: 43}},
		"order free":      {in: `{"rows":1,"cols":1000,"type":"resize"}`, want: Resize{Cols: 1000, Rows: 1}},
		"no type":         {in: `{"cols":1,"rows":1}`, wantErr: bad(`type is required ("resize")`)},
		"other type":      {in: `{"type":"ssh","cols":1,"rows":1}`, wantErr: bad(`unknown type "ssh" (the only control message is "resize")`)},
		"zero cols":       {in: `{"type":"resize","rows":10}`, wantErr: bad("cols must be between 1 and 1000, got 0")},
		"rows too large":  {in: `{"type":"resize","cols":10,"rows":5000}`, wantErr: bad("rows must be between 1 and 1000, got 5000")},
		"string size":     {in: `{"type":"resize","cols":"10","rows":5}`, wantErr: bad(`field "cols" must be an integer`)},
		"extra field":     {in: `{"type":"resize","cols":10,"rows":5,"data":"x"}`, wantErr: bad(`unknown field "data"`)},
		"binary garbage":  {in: "\x00\xff", wantErr: bad("not valid JSON (at byte 1)")},
		"too large":       {in: `{"type":"resize","cols":10,"rows":5}` + strings.Repeat(" ", MaxControlBytes), wantErr: bad(fmt.Sprintf("the message is %d bytes, more than the %d allowed", MaxControlBytes+36, MaxControlBytes))},
		"long field name": {in: `{"` + strings.Repeat("k", 100) + `":1}`, wantErr: bad(`unknown field "` + strings.Repeat("k", 40) + `"...`)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseControl([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || err.Error() != tc.wantErr || !errors.Is(err, ErrBadControl) {
					t.Fatalf("error = %v, want %q (wrapping ErrBadControl)", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// TestHelloFormatsWithoutSecrets: logging a Hello by accident, with any
// verb or through slog, leaks nothing.
func TestHelloFormatsWithoutSecrets(t *testing.T) {
	for _, h := range []Hello{
		{User: "alice", PrivateKey: testPEM, Passphrase: testPassphrase, Cols: 80, Rows: 24},
		{User: "bob", Password: testPassword, Cols: 80, Rows: 24},
	} {
		var sb strings.Builder
		slog.New(slog.NewTextHandler(&sb, nil)).Info("hello", "hello", h)
		for _, s := range []string{fmt.Sprint(h), fmt.Sprintf("%v %+v %#v %s", h, h, h, h), fmt.Sprintf("%v", &h), sb.String()} {
			assertNoSecret(t, s)
			if !strings.Contains(s, h.User) {
				t.Errorf("%q does not name the user", s)
			}
		}
	}
	h := Hello{User: "alice", PrivateKey: testPEM, Passphrase: testPassphrase, Password: testPassword, Cols: 1, Rows: 2}
	h.Wipe()
	if h != (Hello{User: "alice", Cols: 1, Rows: 2}) {
		t.Fatalf("Wipe left %+v", h)
	}
}

func assertNoSecret(t *testing.T, s string) {
	t.Helper()
	for _, secret := range secrets {
		if strings.Contains(s, secret) {
			t.Fatalf("%q contains the secret %q", s, secret)
		}
	}
}
