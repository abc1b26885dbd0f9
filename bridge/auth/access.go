package auth

import (
	"context"
	"fmt"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Attributes is one question to RBAC: may the user do Verb on Group's
// Resource/Subresource named Name in Namespace?
type Attributes struct {
	Namespace, Name                    string
	Verb, Group, Resource, Subresource string
	// Path, when set, makes it a question about a non-resource URL
	// (/metrics): only Verb counts besides it.
	Path string
}

// MetricsAccess is what scraping the bridge's metrics needs, as for any
// controller-runtime metrics endpoint.
func MetricsAccess(path string) Attributes { return Attributes{Verb: "get", Path: path} }

// String reads like the rule a cluster admin would grant.
func (a Attributes) String() string {
	if a.Path != "" {
		return fmt.Sprintf("%s on the non-resource URL %s", a.Verb, a.Path)
	}
	res := a.Resource
	if a.Subresource != "" {
		res += "/" + a.Subresource
	}
	group := a.Group
	if group == "" {
		group = `"" (core)`
	}
	return fmt.Sprintf("%s on %s in API group %s", a.Verb, res, group)
}

// subresourcesGroup is KubeVirt's API group for console, VNC and restart.
const subresourcesGroup = "subresources.kubevirt.io"

// ConsoleAccess is what virtctl console needs; the bridge's SSH leg needs the
// same, because SSH reaches the same guest shell.
func ConsoleAccess(namespace, name string) Attributes {
	return Attributes{Namespace: namespace, Name: name, Verb: "get", Group: subresourcesGroup, Resource: "virtualmachineinstances", Subresource: "console"}
}

// VNCAccess is what virtctl vnc needs.
func VNCAccess(namespace, name string) Attributes {
	return Attributes{Namespace: namespace, Name: name, Verb: "get", Group: subresourcesGroup, Resource: "virtualmachineinstances", Subresource: "vnc"}
}

// RestartAccess is what virtctl restart needs.
func RestartAccess(namespace, name string) Attributes {
	return Attributes{Namespace: namespace, Name: name, Verb: "update", Group: subresourcesGroup, Resource: "virtualmachines", Subresource: "restart"}
}

// ScreenshotAccess is what virtctl vnc screenshot needs. KubeVirt's roles
// list virtualmachineinstances/vnc/screenshot, but the API server takes
// only the first path segment after the name as the subresource, so what it
// enforces for …/vnc/screenshot is get on virtualmachineinstances/vnc; the
// bridge asks the same question.
func ScreenshotAccess(namespace, name string) Attributes { return VNCAccess(namespace, name) }

// VMIAccess is what reading a VMI needs (virtctl vnc reads it to warn about
// a paused VM).
func VMIAccess(namespace, name string) Attributes {
	return Attributes{Namespace: namespace, Name: name, Verb: "get", Group: "kubevirt.io", Resource: "virtualmachineinstances"}
}

// ViewAccess lets a user see a VM, and so who holds its sessions.
func ViewAccess(namespace, name string) Attributes {
	return Attributes{Namespace: namespace, Name: name, Verb: "get", Group: "kubevirt.io", Resource: "virtualmachines"}
}

// Authorizer asks the API server with SubjectAccessReviews. It does not
// cache: one review per session is cheap, and a revoked role must bite on
// the next session.
type Authorizer struct {
	reviews authzclient.SubjectAccessReviewInterface
}

// NewAuthorizer returns an Authorizer that creates reviews through reviews.
func NewAuthorizer(reviews authzclient.SubjectAccessReviewInterface) *Authorizer {
	return &Authorizer{reviews: reviews}
}

// ForbiddenError says which permission a user lacks.
type ForbiddenError struct {
	User string
	Attr Attributes
}

func (e *ForbiddenError) Error() string {
	if e.Attr.Path != "" {
		return fmt.Sprintf("user %q may not do this: it needs %s", e.User, e.Attr)
	}
	return fmt.Sprintf("user %q may not do this on %s/%s: it needs %s (the same RBAC as virtctl)", e.User, e.Attr.Namespace, e.Attr.Name, e.Attr)
}

// Authorize returns nil when u may do a, a *ForbiddenError when RBAC says
// no, and another error when the API server could not be asked.
func (z *Authorizer) Authorize(ctx context.Context, u User, a Attributes) error {
	extra := make(map[string]authzv1.ExtraValue, len(u.Extra))
	for k, v := range u.Extra {
		extra[k] = v
	}
	spec := authzv1.SubjectAccessReviewSpec{User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra}
	if a.Path != "" {
		spec.NonResourceAttributes = &authzv1.NonResourceAttributes{Path: a.Path, Verb: a.Verb}
	} else {
		spec.ResourceAttributes = &authzv1.ResourceAttributes{
			Namespace: a.Namespace, Name: a.Name, Verb: a.Verb,
			Group: a.Group, Resource: a.Resource, Subresource: a.Subresource,
		}
	}
	sar, err := z.reviews.Create(ctx, &authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("ask the API server about %s: %w", a, err)
	}
	if !sar.Status.Allowed || sar.Status.Denied {
		return &ForbiddenError{User: u.Name, Attr: a}
	}
	return nil
}
