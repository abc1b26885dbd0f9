package auth

import "fmt"

// Action is something the bridge does to a VM on a user's behalf, through
// one of KubeVirt's subresources.
type Action string

// The actions the bridge serves.
const (
	// Console is the serial console (virtctl console).
	Console Action = "console"
	// VNC is the graphical display (virtctl vnc).
	VNC Action = "vnc"
	// Screenshot is a PNG of the display (virtctl vnc screenshot).
	Screenshot Action = "screenshot"
	// SSH is a shell over SSH to the guest's port 22 (virtctl ssh, which
	// KubeVirt serves as a port-forward).
	SSH Action = "ssh"
	// Restart restarts the VM (virtctl restart).
	Restart Action = "restart"
	// Start starts a stopped VM (virtctl start): the browser's start on
	// connect.
	Start Action = "start"
)

// subresourcesGroup is KubeVirt's aggregated API group, virt-api's.
const subresourcesGroup = "subresources.kubevirt.io"

// subresourcesVersion is the version the bridge dials; RBAC ignores it.
const subresourcesVersion = "v1"

// check is one SubjectAccessReview KubeVirt's path goes through, without
// the namespace and name.
type check struct {
	verb, resource, subresource string
}

// kubeVirtChecks is what a request for each action must pass in a cluster
// running KubeVirt v1.9.0, in the order it is asked; every check must allow.
//
// The judge is KubeVirt's code: pkg/virt-api/api.go routes each action
// (GET …/virtualmachineinstances/{name}/console, /vnc, /vnc/screenshot,
// /portforward/{port}/{protocol}; PUT …/virtualmachines/{name}/restart and
// /start) and
// pkg/virt-api/rest/authorizer.go (addNamespacedResourceAttributes,
// mapHttpVerbToRbacVerb) turns the request into a SubjectAccessReview: the
// group and resource from the path, GET as "get" and PUT as "update", and as
// subresource everything after the name joined with "/" ("vnc/screenshot"),
// except for portforward, whose port and protocol are left out
// ("portforward"). Before virt-api, kube-apiserver's own authorizer checks
// the request it proxies to the aggregated API, with the first path segment
// after the name as the subresource (its RequestInfoFactory): that is the
// same question for every action but the screenshot, which therefore needs
// both "vnc" (kube-apiserver) and "vnc/screenshot" (virt-api), as KubeVirt's
// own roles grant them (pkg/virt-operator/resource/generate/rbac/cluster.go).
var kubeVirtChecks = map[Action][]check{
	Console:    {{"get", "virtualmachineinstances", "console"}},
	VNC:        {{"get", "virtualmachineinstances", "vnc"}},
	Screenshot: {{"get", "virtualmachineinstances", "vnc"}, {"get", "virtualmachineinstances", "vnc/screenshot"}},
	SSH:        {{"get", "virtualmachineinstances", "portforward"}},
	Restart:    {{"update", "virtualmachines", "restart"}},
	Start:      {{"update", "virtualmachines", "start"}},
}

// KubeVirtAccess is every question the cluster asks before it lets a user
// do a to namespace/name through KubeVirt (see kubeVirtChecks). It panics
// on an action the table does not know: that is a programming error.
func KubeVirtAccess(a Action, namespace, name string) []Attributes {
	checks, ok := kubeVirtChecks[a]
	if !ok {
		panic(fmt.Sprintf("auth: no KubeVirt access for action %q", a))
	}
	out := make([]Attributes, 0, len(checks))
	for _, c := range checks {
		out = append(out, Attributes{
			Namespace: namespace, Name: name, Verb: c.verb,
			Group: subresourcesGroup, Version: subresourcesVersion,
			Resource: c.resource, Subresource: c.subresource,
		})
	}
	return out
}
