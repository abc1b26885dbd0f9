package main

import (
	"errors"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/virtstation/virtstation/bridge/auth"
)

// metricsAuth is the metrics server's filter: the scraper's bearer token is
// checked with a TokenReview and a SubjectAccessReview asks whether its
// user may get the path (/metrics), as controller-runtime's
// filters.WithAuthenticationAndAuthorization does, with the reviews the
// bridge already makes for sessions (bridge/auth). That filter would pull
// k8s.io/apiserver, with OpenTelemetry and gRPC, into the bridge and double
// its binary, and it answers a malformed token with a 500.
func metricsAuth(cfg *rest.Config, httpClient *http.Client) (metricsserver.Filter, error) {
	kube, err := kubernetes.NewForConfigAndClient(cfg, httpClient)
	if err != nil {
		return nil, err
	}
	authn := auth.NewAuthenticator(kube.AuthenticationV1().TokenReviews(), nil)
	authz := auth.NewAuthorizer(kube.AuthorizationV1().SubjectAccessReviews())
	return func(log logr.Logger, next http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") || strings.TrimSpace(token) == "" {
				http.Error(w, "Unauthorized: send a bearer token", http.StatusUnauthorized)
				return
			}
			user, err := authn.Authenticate(r.Context(), strings.TrimSpace(token))
			switch {
			case errors.Is(err, auth.ErrUnauthenticated):
				http.Error(w, "Unauthorized: the token was not accepted", http.StatusUnauthorized)
				return
			case err != nil:
				log.Error(err, "metrics: token review failed")
				http.Error(w, "the API server could not review the token; try again", http.StatusServiceUnavailable)
				return
			}
			err = authz.Authorize(r.Context(), user, auth.MetricsAccess(r.URL.Path))
			var forbidden *auth.ForbiddenError
			switch {
			case errors.As(err, &forbidden):
				http.Error(w, "Forbidden: "+err.Error(), http.StatusForbidden)
				return
			case err != nil:
				log.Error(err, "metrics: access review failed", "user", user.Name)
				http.Error(w, "the API server could not review access; try again", http.StatusServiceUnavailable)
				return
			}
			next.ServeHTTP(w, r)
		}), nil
	}, nil
}
