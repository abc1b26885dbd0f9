package sshbridge

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

const (
	// MaxHelloBytes caps the first message. An RSA-16384 private key in PEM
	// is about 12 KiB; anything near the cap is not a credential.
	MaxHelloBytes = 64 << 10
	// MaxControlBytes caps a control message; a resize is about 40 bytes.
	MaxControlBytes = 1 << 10

	// DefaultCols is the terminal width when the first message leaves it
	// out (or sends 0).
	DefaultCols = 80
	// DefaultRows is the terminal height when the first message leaves it
	// out (or sends 0).
	DefaultRows = 24
	// MaxDimension bounds cols and rows; no screen shows more, and the
	// guest's terminal allocates per cell.
	MaxDimension = 1000

	// maxUserLen is generous: Linux allows 32, directory users with a
	// domain suffix run longer.
	maxUserLen = 64

	// helloType and resizeType are the message "type" values.
	helloType  = "ssh"
	resizeType = "resize"
)

// Hello is the first message of an SSH session: who to log in as, with what,
// and the terminal size. Exactly one of PrivateKey and Password is set.
//
// Hello formats itself without its secrets (String, GoString, LogValue), so
// logging one by accident leaks nothing. Dial wipes the secret fields once it
// no longer needs them.
type Hello struct {
	// User is the guest account.
	User string
	// PrivateKey is an OpenSSH, PKCS#1, PKCS#8 or SEC1 PEM private key.
	PrivateKey string
	// Passphrase decrypts PrivateKey when it is encrypted.
	Passphrase string
	// Password is the account's password.
	Password string
	// Cols and Rows are the terminal size, in 1..MaxDimension.
	Cols, Rows int
}

// Resize is a control message: the browser's terminal changed size.
type Resize struct {
	Cols, Rows int
}

// ParseHello parses and validates the first message of an SSH session:
//
//	{"type":"ssh","user":"alice","privateKey":"-----BEGIN ...","passphrase":"...","cols":120,"rows":40}
//	{"type":"ssh","user":"alice","password":"...","cols":120,"rows":40}
//
// "type" may be left out (the design's first form has none) but if present
// must be "ssh". Unknown or repeated fields are refused, keys match exactly,
// an empty or null secret counts as absent, and zero cols or rows mean
// DefaultCols and DefaultRows. Errors wrap ErrBadHello and never contain the
// key, passphrase or password.
func ParseHello(data []byte) (Hello, error) {
	h, err := parseHello(data)
	if err != nil {
		return Hello{}, fmt.Errorf("%w: %w", ErrBadHello, err)
	}
	return h, nil
}

func parseHello(data []byte) (Hello, error) {
	if len(data) > MaxHelloBytes {
		return Hello{}, fmt.Errorf("the message is %d bytes, more than the %d allowed", len(data), MaxHelloBytes)
	}
	var typ string
	var h Hello
	err := decodeObject(data, map[string]any{
		"type":       &typ,
		"user":       &h.User,
		"privateKey": &h.PrivateKey,
		"passphrase": &h.Passphrase,
		"password":   &h.Password,
		"cols":       &h.Cols,
		"rows":       &h.Rows,
	})
	if err != nil {
		return Hello{}, err
	}
	if err := validateHello(typ, &h); err != nil {
		h.Wipe()
		return Hello{}, err
	}
	return h, nil
}

// validateHello checks a decoded first message and fills in the default
// size.
func validateHello(typ string, h *Hello) error {
	if typ != "" && typ != helloType {
		return fmt.Errorf("type must be %q, got %s", helloType, quoteName(typ))
	}
	if err := validateUser(h.User); err != nil {
		return err
	}
	switch {
	case h.PrivateKey != "" && h.Password != "":
		return errors.New("send either privateKey or password, not both")
	case h.PrivateKey == "" && h.Password == "":
		return errors.New("send privateKey or password")
	case h.Passphrase != "" && h.PrivateKey == "":
		return errors.New("passphrase goes with privateKey, which is missing")
	case h.PrivateKey != "" && !looksLikePEMPrivateKey(h.PrivateKey):
		return errors.New("privateKey must be a PEM private key (-----BEGIN ... PRIVATE KEY-----), such as the content of ~/.ssh/id_ed25519")
	}
	if h.Cols == 0 {
		h.Cols = DefaultCols
	}
	if h.Rows == 0 {
		h.Rows = DefaultRows
	}
	return validateSize(h.Cols, h.Rows)
}

// validateUser accepts the portable user-name characters plus '@' for
// directory users: letters, digits, '.', '_', '-', '@', not starting with
// '-' (which ssh tools read as an option).
func validateUser(u string) error {
	switch {
	case u == "":
		return errors.New("user is required")
	case len(u) > maxUserLen:
		return fmt.Errorf("user is %d bytes long, more than %d", len(u), maxUserLen)
	case u[0] == '-':
		return fmt.Errorf("user %s must not start with '-'", quoteName(u))
	}
	for _, r := range u {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r)
		if !ok {
			return fmt.Errorf("user %s may contain only letters, digits, '.', '_', '-' and '@'", quoteName(u))
		}
	}
	return nil
}

// validateSize checks a terminal size.
func validateSize(cols, rows int) error {
	if cols < 1 || cols > MaxDimension {
		return fmt.Errorf("cols must be between 1 and %d, got %d", MaxDimension, cols)
	}
	if rows < 1 || rows > MaxDimension {
		return fmt.Errorf("rows must be between 1 and %d, got %d", MaxDimension, rows)
	}
	return nil
}

// looksLikePEMPrivateKey is a cheap shape check so an obviously wrong field
// (a public key, a file path) is refused before any network I/O; Dial
// parses the key for real.
func looksLikePEMPrivateKey(s string) bool {
	i := strings.Index(s, "-----BEGIN ")
	return i >= 0 && strings.Contains(s[i:], "PRIVATE KEY-----")
}

// ParseControl parses a control message sent after the first one:
//
//	{"type":"resize","cols":120,"rows":40}
//
// Resize is the only type. Both sizes are required and must be in
// 1..MaxDimension. Errors wrap ErrBadControl.
func ParseControl(data []byte) (Resize, error) {
	r, err := parseControl(data)
	if err != nil {
		return Resize{}, fmt.Errorf("%w: %w", ErrBadControl, err)
	}
	return r, nil
}

func parseControl(data []byte) (Resize, error) {
	if len(data) > MaxControlBytes {
		return Resize{}, fmt.Errorf("the message is %d bytes, more than the %d allowed", len(data), MaxControlBytes)
	}
	var typ string
	var r Resize
	if err := decodeObject(data, map[string]any{"type": &typ, "cols": &r.Cols, "rows": &r.Rows}); err != nil {
		return Resize{}, err
	}
	if typ != resizeType {
		if typ == "" {
			return Resize{}, fmt.Errorf("type is required (%q)", resizeType)
		}
		return Resize{}, fmt.Errorf("unknown type %s (the only control message is %q)", quoteName(typ), resizeType)
	}
	if err := validateSize(r.Cols, r.Rows); err != nil {
		return Resize{}, err
	}
	return r, nil
}

// UsesKey reports whether h authenticates with a private key.
func (h Hello) UsesKey() bool { return h.PrivateKey != "" }

// Wipe drops h's references to its secrets. Go strings are immutable and
// the garbage collector may have copied them, so this cannot erase the bytes;
// it makes sure h no longer keeps them alive.
func (h *Hello) Wipe() {
	h.PrivateKey, h.Passphrase, h.Password = "", "", ""
}

// method names h's authentication method, for logs.
func (h Hello) method() string {
	switch {
	case h.PrivateKey != "":
		return "publickey"
	case h.Password != "":
		return "password"
	default:
		return "none"
	}
}

// String describes h without its secrets.
func (h Hello) String() string {
	return fmt.Sprintf("ssh hello{user %q, %s, %dx%d}", h.User, h.method(), h.Cols, h.Rows)
}

// GoString is String, so %#v does not print the secrets either.
func (h Hello) GoString() string { return h.String() }

// LogValue describes h to log/slog without its secrets.
func (h Hello) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("user", h.User),
		slog.String("auth", h.method()),
		slog.Int("cols", h.Cols),
		slog.Int("rows", h.Rows),
	)
}
