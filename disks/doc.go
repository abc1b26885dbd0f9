// Package disks answers the one question every webhook and `virtstation
// render` ask about a data disk: which object is the disk of that name in a
// namespace, and what do its labels and claim annotations say. The answer is
// the DataVolume of that name when there is one (CDI's PVC of the same name
// belongs to it), else the PersistentVolumeClaim, else none: a Disk with its
// kind, whether it is labelled virtstation.io/data-disk=true, and its claims
// (claims.State).
//
// Lookup is the question; Cache answers it from a controller-runtime reader
// (the manager's informer cache, or the API server for a fresh read), and
// Static from objects given up front (render's manifests, unit tests). The
// mutating webhook, the validating webhooks and render all ask through it,
// so they agree on which object a name denotes.
package disks
