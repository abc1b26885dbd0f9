package auth

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestTokenFrom(t *testing.T) {
	sub := func(tok string) string {
		return BearerSubprotocolPrefix + base64.RawURLEncoding.EncodeToString([]byte(tok))
	}
	cases := map[string]struct {
		auth, protocols string
		want            Credential
		wantErr         string
	}{
		"header":                     {auth: "Bearer abc.def", want: Credential{Token: "abc.def"}},
		"header scheme any case":     {auth: "bearer abc", want: Credential{Token: "abc"}},
		"subprotocol":                {protocols: "plain.kubevirt.io, " + sub("tok-1"), want: Credential{Token: "tok-1", ViaSubprotocol: true}},
		"subprotocol with padding":   {protocols: BearerSubprotocolPrefix + base64.URLEncoding.EncodeToString([]byte("ab")), want: Credential{Token: "ab", ViaSubprotocol: true}},
		"header wins":                {auth: "Bearer h", protocols: sub("s"), want: Credential{Token: "h"}},
		"none":                       {protocols: "binary", wantErr: "no bearer token"},
		"basic auth":                 {auth: "Basic dXNlcjpwYXNz", wantErr: "not a bearer token"},
		"empty bearer":               {auth: "Bearer ", wantErr: "empty"},
		"subprotocol not base64":     {protocols: BearerSubprotocolPrefix + "%%%", wantErr: "not base64url"},
		"subprotocol token with tab": {protocols: sub("a\tb"), wantErr: "white space"},
		"token too long":             {auth: "Bearer " + strings.Repeat("a", maxTokenBytes+1), wantErr: "too long"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tc.auth != "" {
				r.Header.Set("Authorization", tc.auth)
			}
			if tc.protocols != "" {
				r.Header.Set("Sec-WebSocket-Protocol", tc.protocols)
			}
			got, err := TokenFrom(r)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("TokenFrom = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestOtherSubprotocolsNeverEchoesTheToken(t *testing.T) {
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("Sec-WebSocket-Protocol", "binary, "+BearerSubprotocolPrefix+"c2VjcmV0, plain.kubevirt.io")
	got := OtherSubprotocols(r)
	if strings.Join(got, ",") != "binary,plain.kubevirt.io" {
		t.Fatalf("OtherSubprotocols = %q", got)
	}
}

func FuzzTokenFrom(f *testing.F) {
	f.Add("Bearer abc", "")
	f.Add("", "binary, "+BearerSubprotocolPrefix+"YWJj")
	f.Add("", BearerSubprotocolPrefix)
	f.Fuzz(func(t *testing.T, auth, protocols string) {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header["Authorization"] = []string{auth}
		r.Header["Sec-WebSocket-Protocol"] = []string{protocols}
		c, err := TokenFrom(r)
		if err != nil {
			if strings.Contains(err.Error(), c.Token) && c.Token != "" {
				t.Fatalf("error carries a token")
			}
			return
		}
		if checkToken(c.Token) != nil {
			t.Fatalf("accepted an invalid token %q", c.Token)
		}
		if errors.Is(err, ErrNoToken) {
			t.Fatal("unreachable")
		}
	})
}
