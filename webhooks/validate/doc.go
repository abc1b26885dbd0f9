// Package validate is Virtstation's validating admission webhook for KubeVirt
// VirtualMachines and the Rego policy engine behind it.
//
// The policies are Rego v1 modules: the shipped ones in policies/ (embedded),
// plus operator modules from ConfigMaps labelled virtstation.io/policy=true
// in the install namespace, which add modules or replace shipped ones of the
// same name. A policy set is compiled in strict mode with a capabilities set
// that has no network or runtime built-ins, its *_test.rego tests must pass,
// and only then is it prepared once and swapped in atomically (Engine.Load).
// A set that fails keeps the previous one active.
//
// Each admission is judged on one input document (BuildInput): the
// operation, object, oldObject and userInfo, the parsed data disks, and a
// snapshot of the disks' state and claims read from informer caches, so no
// API call happens during evaluation. The webhook decodes the request once
// (DecodeRequest) and builds only the parts of that document the active
// policy set reads (Engine.EvaluateRequest). The result is the deny and warn
// sets of data.virtstation, each element {id, field, message}, read into a
// policy.Decision; the per-rule enforcement modes (policy.Modes, from the
// virtstation-policy-config ConfigMap) decide whether a deny element denies,
// warns, or is only logged and counted. Those words, and the rule ids, are
// package policy's; this package evaluates.
//
// PolicyLoader keeps the engine and the modes in step with the ConfigMaps,
// and ConfigMapValidator rejects, at apply time, operator Rego that does not
// compile, uses a disallowed built-in, or fails its tests.
package validate
