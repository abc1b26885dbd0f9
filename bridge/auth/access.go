package auth

import (
	"context"
	"errors"
	"fmt"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authzclient "k8s.io/client-go/kubernetes/typed/authorization/v1"
)

// Attributes is one question to RBAC: may the user do Verb on Group's
// Resource/Subresource named Name in Namespace? Version is passed on as
// KubeVirt passes it; RBAC ignores it.
type Attributes struct {
	Namespace, Name                             string
	Verb, Group, Version, Resource, Subresource string
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

// AuthorizeAll asks about each of attrs in turn and returns the first
// refusal or failure, as Authorize does; nil means every one is allowed.
// It asks at least once: an empty attrs is a programming error.
func (z *Authorizer) AuthorizeAll(ctx context.Context, u User, attrs []Attributes) error {
	if len(attrs) == 0 {
		return errors.New("no access to review")
	}
	for _, a := range attrs {
		if err := z.Authorize(ctx, u, a); err != nil {
			return err
		}
	}
	return nil
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
			Group: a.Group, Version: a.Version, Resource: a.Resource, Subresource: a.Subresource,
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
