// Package virttemplate is a compile-only stand-in for
// kubevirt.io/virt-template-client-go/virttemplate (refused by the Go module
// proxy): the constructor KubeVirt v1.9.0's informer factory calls. It
// always fails, so an informer for templates would panic loudly rather than
// read anything; the admission binary starts none.
package virttemplate

import (
	"errors"

	"k8s.io/client-go/rest"
)

// TemplateV1beta1Interface gives the REST client of the template API.
type TemplateV1beta1Interface interface {
	RESTClient() rest.Interface
}

// Interface is the template clientset.
type Interface interface {
	TemplateV1beta1() TemplateV1beta1Interface
}

// NewForConfig always fails: this is a compile-only stand-in.
func NewForConfig(*rest.Config) (Interface, error) {
	return nil, errors.New("virt-template client: compile-only stand-in in virtstation's test/kvadmission")
}
