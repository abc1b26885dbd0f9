package sshbridge

import (
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"golang.org/x/crypto/ssh"
)

// credentials hold one Dial's secret, parsed, for the length of the
// handshake. x/crypto/ssh keeps the ClientConfig (and so its AuthMethods)
// reachable for the life of the connection, so the methods read the secret
// through credentials, and wipe drops it once authentication is over: the
// connection then references an empty holder.
type credentials struct {
	user string

	mu        sync.Mutex
	rawKey    any // the parsed private key, wiped by wipe
	signer    ssh.Signer
	password  string
	attempted bool     // the guest was offered our secret
	allowed   []string // the methods the guest last said it accepts
}

// newCredentials parses h's secret. A key that does not parse, or needs a
// passphrase that h lacks, is ErrBadHello; a wrong passphrase is
// ErrAuthFailed. The errors never contain the secret or the parser's words
// about it.
func newCredentials(h *Hello) (*credentials, error) {
	c := &credentials{user: h.User}
	if h.PrivateKey == "" {
		c.password = h.Password
		return c, nil
	}
	raw, err := parsePrivateKey(h.PrivateKey, h.Passphrase)
	if err != nil {
		return nil, err
	}
	signer, err := ssh.NewSignerFromKey(raw)
	if err != nil {
		wipeKey(raw)
		return nil, fmt.Errorf("%w: privateKey is of a type SSH cannot use", ErrBadHello)
	}
	c.rawKey, c.signer = raw, signer
	return c, nil
}

// parsePrivateKey parses a PEM private key, decrypting it with passphrase
// only when it is encrypted (a passphrase sent along with a plain key is
// ignored). The copies it makes of the secrets are zeroed before it returns.
func parsePrivateKey(key, passphrase string) (any, error) {
	pemBytes := []byte(key)
	defer clear(pemBytes)
	raw, err := ssh.ParseRawPrivateKey(pemBytes)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		if passphrase == "" {
			return nil, fmt.Errorf("%w: the private key is encrypted; send its passphrase", ErrBadHello)
		}
		pass := []byte(passphrase)
		defer clear(pass)
		raw, err = ssh.ParseRawPrivateKeyWithPassphrase(pemBytes, pass)
		if errors.Is(err, x509.IncorrectPasswordError) {
			return nil, fmt.Errorf("%w: the passphrase does not decrypt the private key", ErrAuthFailed)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: privateKey could not be parsed as an OpenSSH, PKCS#1, PKCS#8 or SEC1 private key", ErrBadHello)
	}
	return raw, nil
}

// authMethods are the methods Dial offers: the key, or the password both as
// "password" and as a one-prompt "keyboard-interactive" (guests that check
// passwords through PAM often offer only the latter).
func (c *credentials) authMethods() []ssh.AuthMethod {
	if c.signer != nil {
		return []ssh.AuthMethod{ssh.PublicKeysCallback(func() ([]ssh.Signer, error) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.signer == nil {
				return nil, errors.New("credentials already wiped")
			}
			c.attempted = true
			return []ssh.Signer{c.signer}, nil
		})}
	}
	password := func() (string, error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.password == "" {
			return "", errors.New("credentials already wiped")
		}
		c.attempted = true
		return c.password, nil
	}
	return []ssh.AuthMethod{
		ssh.PasswordCallback(password),
		ssh.KeyboardInteractive(func(_, _ string, questions []string, echos []bool) ([]string, error) {
			return answerPrompts(questions, echos, password)
		}),
	}
}

// answerPrompts answers a keyboard-interactive round: no questions (an
// informational round) gets no answers, one hidden question gets the
// password; anything else (an OTP, a yes/no) the bridge cannot answer.
func answerPrompts(questions []string, echos []bool, password func() (string, error)) ([]string, error) {
	switch {
	case len(questions) == 0:
		return []string{}, nil
	case len(questions) == 1 && len(echos) == 1 && !echos[0]:
		p, err := password()
		if err != nil {
			return nil, err
		}
		return []string{p}, nil
	default:
		return nil, fmt.Errorf("the guest asks %d questions; the bridge answers only a single password prompt", len(questions))
	}
}

// observe is the ClientConfig.AuthCallback: it records which methods the
// guest accepts and lets x/crypto pick the next method as usual.
func (c *credentials) observe(ac *ssh.ClientAuthContext) (ssh.AuthMethod, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ac.AllowedMethods != nil {
		c.allowed = slices.Clone(ac.AllowedMethods)
	}
	return nil, nil
}

// method is the SSH method name the credentials use.
func (c *credentials) method() string {
	if c.signer != nil {
		return "publickey"
	}
	return "password"
}

// authError explains an authentication failure without the secret.
func (c *credentials) authError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	what := map[string]string{"publickey": "private key", "password": "password"}[c.method()]
	accepts := func(m string) bool {
		return slices.Contains(c.allowed, m) || m == "password" && slices.Contains(c.allowed, "keyboard-interactive")
	}
	switch {
	case c.attempted:
		return fmt.Errorf("%w: the guest refused the %s for user %q", ErrAuthFailed, what, c.user)
	case len(c.allowed) > 0 && !accepts(c.method()):
		return fmt.Errorf("%w: the guest does not accept %s logins (it accepts: %s)", ErrAuthFailed, what, strings.Join(c.allowed, ", "))
	default:
		return fmt.Errorf("%w: the guest refused user %q", ErrAuthFailed, c.user)
	}
}

// wipe drops the secret and zeroes what of the parsed key Go lets us reach
// (an ed25519 key; see wipeKey). Authentication must be over.
func (c *credentials) wipe() {
	c.mu.Lock()
	defer c.mu.Unlock()
	wipeKey(c.rawKey)
	c.rawKey, c.signer, c.password = nil, nil, ""
}

// wipeKey zeroes an ed25519 private key in place. RSA and ECDSA keys keep
// their private numbers in big.Int and in internal copies the standard
// library does not expose (and deprecates touching), so they are only
// dropped, for the garbage collector.
func wipeKey(raw any) {
	switch k := raw.(type) {
	case ed25519.PrivateKey:
		clear(k)
	case *ed25519.PrivateKey:
		clear(*k)
	}
}
