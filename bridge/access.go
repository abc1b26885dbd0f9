package bridge

import (
	"errors"
	"net/http"

	"github.com/virtstation/virtstation/bridge/auth"
)

// who checks the request's Origin, authenticates its token and asks RBAC
// about each of attrs; all must be allowed. The credential is returned even
// on failure, so a refusal can reach a browser in the form it can read.
func (s *Server) who(r *http.Request, attrs ...auth.Attributes) (auth.User, auth.Credential, *Problem) {
	user, cred, p := s.authenticate(r)
	if p != nil {
		return user, cred, p
	}
	if err := s.authz.AuthorizeAll(r.Context(), user, attrs); err != nil {
		var fe *auth.ForbiddenError
		if errors.As(err, &fe) {
			return user, cred, problemf(http.StatusForbidden, ReasonForbidden, "%s", err)
		}
		s.deps.Log.Error(err, "access review failed", "user", user.Name)
		return user, cred, problemf(http.StatusBadGateway, ReasonUpstream, "the Kubernetes API server could not review access; try again")
	}
	return user, cred, nil
}

// authenticate checks the request's Origin and its token, and nothing more.
func (s *Server) authenticate(r *http.Request) (auth.User, auth.Credential, *Problem) {
	if err := s.origins.Check(r); err != nil {
		return auth.User{}, auth.Credential{}, problemf(http.StatusForbidden, ReasonOriginForbidden, "%s", err)
	}
	cred, err := auth.TokenFrom(r)
	if err != nil {
		return auth.User{}, cred, problemf(http.StatusUnauthorized, ReasonUnauthorized, "%s", err)
	}
	user, err := s.authn.Authenticate(r.Context(), cred.Token)
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		return user, cred, problemf(http.StatusUnauthorized, ReasonUnauthorized, "the token was not accepted; get a fresh one (kubectl create token, or log in again)")
	case err != nil:
		s.deps.Log.Error(err, "token review failed")
		return user, cred, problemf(http.StatusBadGateway, ReasonUpstream, "the Kubernetes API server could not review the token; try again")
	}
	return user, cred, nil
}
