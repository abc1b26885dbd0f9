// Package admit is the admission plumbing Virtstation's webhooks share: which
// requests a webhook judges (CreateOrUpdate, DryRun), and the responses it
// gives, one per outcome: a policy verdict is Deny (403, the field errors as
// causes), an internal fault is Internal (500, the details in the log,
// never in the answer), and a mutation is Patched (a JSON patch).
//
// It sits below every webhook package (webhooks/mutate, webhooks/validate,
// claims) and imports no Virtstation package, so that no webhook reaches
// into another for its plumbing.
package admit
