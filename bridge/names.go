package bridge

import (
	"fmt"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxLoggedName bounds how much of a refused name is logged: it comes from
// the request line, which anyone can send.
const maxLoggedName = 64

// invalidName explains why namespace and name cannot name a VM: the API
// server would refuse them (or, for "..", mean another path), so the bridge
// refuses them itself instead of sending them on. Empty means both are valid.
func invalidName(namespace, name string) string {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Sprintf("namespace %q is not a valid namespace name: %s", clip(namespace), strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Sprintf("%q is not a valid VM name: %s", clip(name), strings.Join(errs, "; "))
	}
	return ""
}

func clip(s string) string {
	if len(s) > maxLoggedName {
		return s[:maxLoggedName] + "…"
	}
	return s
}

// checkNames refuses, with a log line, a request whose path names no VM a
// cluster can hold.
func (s *Server) checkNames(r *http.Request) *Problem {
	msg := invalidName(r.PathValue("namespace"), r.PathValue("name"))
	if msg == "" {
		return nil
	}
	s.deps.Log.Info("refused a request with an invalid name", "path", clip(r.URL.EscapedPath()), "why", msg)
	return problemf(http.StatusBadRequest, ReasonBadRequest, "%s", msg)
}
