// Package layers holds the import rules of the module's packages, checked
// with `go list` on the module itself: which package may depend on which.
package layers
