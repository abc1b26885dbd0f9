// Package certs provisions and rotates the webhook's own CA and serving
// certificate when cert-manager is not installed (--cert-mode=self).
//
// Everything lives in one Secret (SecretKey* entries, kubernetes.io/tls).
// A Rotator runs on every replica: each one copies the Secret's serving pair
// into its cert dir, where the webhook server's certwatcher reloads it in
// place; the leader alone writes the Secret and keeps the caBundle of every
// webhook in the named webhook configurations equal to the Secret's bundle.
//
// What the leader does is decided by plan, a pure function of the Secret,
// the bundles it observed and the time:
//
//   - no Secret, or an unusable CA: generate a CA and a serving certificate;
//   - serving certificate missing, wrong, or at two thirds of its lifetime:
//     issue a new one from the active CA;
//   - CA at two thirds of its lifetime: add a next CA to every bundle
//     (old + new); once every bundle has held it for the overlap, it issues
//     the serving certificate and the old CA becomes "previous"; one
//     overlap later the previous CA leaves the bundles;
//   - any bundle that differs (cleared, edited, a new webhook): patch it,
//     with a JSON patch guarded by the resourceVersion.
//
// So at every moment the certificate any replica serves chains to a CA in
// every bundle, and an API server never fails an admission on TLS because
// of a rotation.
package certs
