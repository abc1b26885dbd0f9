// Package render runs the webhooks' mutation offline: it reads manifests and
// a description of the cluster state, and returns the VirtualMachines as the
// API server would admit them, with the denials and warnings the webhooks
// would give. Audit judges the managed VMs that result as the webhook's
// policy audit does, and returns their policy reports. `virtstation render`
// (and `render --report`) is its command-line face.
package render
