// Package auth decides who a bridge client is and what it may open.
//
// A client proves who it is with a Kubernetes bearer token, sent either in the
// Authorization header (CLIs) or, because browsers cannot set headers on a
// WebSocket, in the base64url.bearer.authorization.k8s.io.<token> subprotocol,
// the same convention the kube-apiserver accepts. The token is checked with a
// TokenReview and the answer cached briefly; what the user may open is asked
// of the API server with a SubjectAccessReview per session, on the same
// subresources virtctl needs, so access follows the cluster's RBAC. An Origin
// allowlist keeps other web sites from riding a user's token.
//
// Tokens never appear in logs or errors: the cache is keyed by a hash.
package auth
