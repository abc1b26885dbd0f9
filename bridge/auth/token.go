package auth

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"

	"github.com/gorilla/websocket"
)

// BearerSubprotocolPrefix introduces a token carried as a WebSocket
// subprotocol; the rest is the token, base64url-encoded without padding.
const BearerSubprotocolPrefix = "base64url.bearer.authorization.k8s.io."

// maxTokenBytes bounds a token; service-account and OIDC tokens are a few KiB.
const maxTokenBytes = 16 << 10

// ErrNoToken means the request carried no bearer token at all.
var ErrNoToken = errors.New("no bearer token: send it in the Authorization header or in the " + BearerSubprotocolPrefix + "<token> WebSocket subprotocol")

// Credential is a bearer token and how it arrived.
type Credential struct {
	Token string
	// ViaSubprotocol is true when the token came in the WebSocket
	// subprotocol, i.e. from a browser, which cannot read HTTP statuses of a
	// failed handshake.
	ViaSubprotocol bool
}

// TokenFrom extracts the bearer token of r. The Authorization header wins
// over the subprotocol.
func TokenFrom(r *http.Request) (Credential, error) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, ok := strings.Cut(h, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Credential{}, errors.New("the Authorization header is not a bearer token")
		}
		token = strings.TrimSpace(token)
		if err := checkToken(token); err != nil {
			return Credential{}, err
		}
		return Credential{Token: token}, nil
	}
	for _, p := range websocket.Subprotocols(r) {
		enc, ok := strings.CutPrefix(p, BearerSubprotocolPrefix)
		if !ok {
			continue
		}
		raw, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(enc, "="))
		if err != nil {
			return Credential{}, errors.New("the bearer subprotocol is not base64url-encoded")
		}
		if err := checkToken(string(raw)); err != nil {
			return Credential{}, err
		}
		return Credential{Token: string(raw), ViaSubprotocol: true}, nil
	}
	return Credential{}, ErrNoToken
}

// OtherSubprotocols is the client's offered subprotocols without the token
// one, from which the server picks its answer; the token is never echoed.
func OtherSubprotocols(r *http.Request) []string {
	var out []string
	for _, p := range websocket.Subprotocols(r) {
		if !strings.HasPrefix(p, BearerSubprotocolPrefix) {
			out = append(out, p)
		}
	}
	return out
}

func checkToken(t string) error {
	switch {
	case t == "":
		return errors.New("the bearer token is empty")
	case len(t) > maxTokenBytes:
		return errors.New("the bearer token is too long")
	case strings.ContainsAny(t, " \t\r\n"):
		return errors.New("the bearer token contains white space")
	}
	return nil
}
