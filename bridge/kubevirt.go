package bridge

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kubevirtv1 "kubevirt.io/api/core/v1"

	"github.com/virtstation/virtstation/bridge/auth"
	"github.com/virtstation/virtstation/bridge/upstream"
)

// KubeVirt's API surface that its clients read besides the console and the
// display: virtctl asks for the subresource group's discovery and version
// before it reports an error, reads the VMI after a VNC viewer connects (to
// warn about a paused VM), and takes screenshots; KubeVirt Manager still
// uses the v1alpha3 paths. The bridge answers these as virt-api does.

// subresourcesGroup is KubeVirt's aggregated API group.
const subresourcesGroup = "subresources.kubevirt.io"

// kubeVirtVersions are the subresource group's versions, preferred first;
// v1alpha3 is an alias of v1, as in virt-api.
var kubeVirtVersions = []string{"v1", "v1alpha3"}

// Limits of what the bridge relays from KubeVirt's plain GETs.
const (
	// maxScreenshotBytes bounds a screenshot: a PNG of the largest display
	// KubeVirt drives (5K, 5120x2880, 24-bit) that does not compress at all
	// is 44 MB. It is streamed, never held whole.
	maxScreenshotBytes = 48 << 20
	// maxVersionBytes bounds KubeVirt's version.Info, a few hundred bytes.
	maxVersionBytes = 64 << 10
)

// apiGroup is GET /apis/subresources.kubevirt.io. (virt-api names the group
// "subresource.kubevirt.io" there, a typo clients ignore: they read only
// the preferred version.)
func apiGroup() metav1.APIGroup {
	g := metav1.APIGroup{
		TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"},
		Name:     subresourcesGroup,
	}
	for _, v := range kubeVirtVersions {
		g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: subresourcesGroup + "/" + v, Version: v})
	}
	g.PreferredVersion = g.Versions[0]
	return g
}

// apiResources is GET /apis/subresources.kubevirt.io/{version}: what the
// bridge serves of the group, in virt-api's form.
func apiResources(version string) metav1.APIResourceList {
	l := metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: subresourcesGroup + "/" + version,
	}
	for _, r := range []string{"virtualmachineinstances/console", "virtualmachineinstances/vnc", "virtualmachineinstances/vnc/screenshot"} {
		l.APIResources = append(l.APIResources, metav1.APIResource{Name: r, Namespaced: true, Verbs: metav1.Verbs{"get"}})
	}
	return l
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func (s *Server) discoverGroup(w http.ResponseWriter, _ *http.Request) { writeJSON(w, apiGroup()) }

func (s *Server) discoverVersion(version string) http.HandlerFunc {
	list := apiResources(version)
	return func(w http.ResponseWriter, _ *http.Request) { writeJSON(w, list) }
}

// kubeVirtVersion relays KubeVirt's version.Info to any authenticated user,
// as KubeVirt's kubevirt.io:default role grants it (to
// system:authenticated); the bridge reads it with its own ServiceAccount.
func (s *Server) kubeVirtVersion(w http.ResponseWriter, r *http.Request) {
	if _, _, p := s.authenticate(r); p != nil {
		p.write(w)
		return
	}
	body, _, err := s.deps.Upstream.Get(r.Context(), "/apis/"+subresourcesGroup+"/v1/version", nil, maxVersionBytes)
	if err != nil {
		s.deps.Log.Error(err, "read KubeVirt's version")
		problemf(http.StatusBadGateway, ReasonUpstream, "could not read KubeVirt's version; try again").write(w)
		return
	}
	defer func() { _ = body.Close() }()
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.Copy(w, body)
}

// getVMI answers a read of the VMI, as the API server would: only for a
// user who may get it, and read-only. virtctl vnc reads it after a viewer
// connects, to warn about a paused VM.
func (s *Server) getVMI(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if p := s.checkNames(r); p != nil {
		p.write(w)
		return
	}
	if _, _, p := s.who(r, auth.VMIAccess(ns, name)); p != nil {
		p.write(w)
		return
	}
	vmi := &kubevirtv1.VirtualMachineInstance{}
	if err := s.deps.Reader.Get(r.Context(), types.NamespacedName{Namespace: ns, Name: name}, vmi); err != nil {
		p := readProblem(err, "VirtualMachineInstance", ns, name)
		if p.Status != http.StatusNotFound {
			s.deps.Log.Error(err, "read a VMI", "vmi", ns+"/"+name)
		}
		p.write(w)
		return
	}
	vmi.APIVersion, vmi.Kind = kubevirtv1.SchemeGroupVersion.String(), "VirtualMachineInstance"
	writeJSON(w, vmi)
}

// screenshot relays KubeVirt's PNG of the VMI's display (virtctl vnc
// screenshot), under the permissions the API server and virt-api enforce
// for it (vnc and vnc/screenshot; see auth.KubeVirtAccess). It
// takes no session slot: it does not disturb whoever holds the display.
func (s *Server) screenshot(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	if p := s.checkNames(r); p != nil {
		p.write(w)
		return
	}
	user, _, p := s.who(r, auth.KubeVirtAccess(auth.Screenshot, ns, name)...)
	if p != nil {
		p.write(w)
		return
	}
	if _, p := resolve(r.Context(), s.deps.Reader, ns, name, false, modeVNC); p != nil {
		p.write(w)
		return
	}
	q := url.Values{"moveCursor": {"false"}}
	if r.URL.Query().Get("moveCursor") == "true" {
		q.Set("moveCursor", "true")
	}
	path := fmt.Sprintf("/apis/%s/v1/namespaces/%s/virtualmachineinstances/%s/vnc/screenshot", subresourcesGroup, url.PathEscape(ns), url.PathEscape(name))
	body, contentType, err := s.deps.Upstream.Get(r.Context(), path, q, maxScreenshotBytes)
	if err != nil {
		if errors.Is(err, upstream.ErrNotFound) {
			problemf(http.StatusNotFound, ReasonVMNotFound, "KubeVirt does not know VirtualMachineInstance %s/%s", ns, name).write(w)
			return
		}
		s.deps.Log.Error(err, "screenshot", "vmi", ns+"/"+name)
		problemf(http.StatusBadGateway, ReasonUpstream, "KubeVirt did not take the screenshot; try again").write(w)
		return
	}
	defer func() { _ = body.Close() }()
	if contentType == "" {
		contentType = "image/png"
	}
	w.Header().Set("Content-Type", contentType)
	if _, err := io.Copy(w, body); err != nil {
		// The status is sent; all that is left is to cut the answer short.
		s.deps.Log.Error(err, "relay a screenshot", "vmi", ns+"/"+name)
		panic(http.ErrAbortHandler)
	}
	s.deps.Log.Info("screenshot taken", "vmi", ns+"/"+name, "user", user.Name)
}
