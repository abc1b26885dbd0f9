package virthandler

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The API this server stands in for.
const (
	Group   = "subresources.kubevirt.io"
	Version = "v1"
)

// basePath is where the subresources live.
const basePath = "/apis/" + Group + "/" + Version

// The resources named in NotFound errors, as virt-api names them.
var (
	vmiResource = schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachineinstance"}
	vmResource  = schema.GroupResource{Group: "kubevirt.io", Resource: "virtualmachine"}
)

// discoveryDocument is the APIResourceList of the subresources served here;
// the aggregator reads it to mark the APIService Available.
func discoveryDocument() ([]byte, error) {
	return json.Marshal(&metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: Group + "/" + Version,
		APIResources: []metav1.APIResource{
			{Name: "virtualmachineinstances/console", Namespaced: true, Verbs: []string{"get"}},
			{Name: "virtualmachineinstances/vnc", Namespaced: true, Verbs: []string{"get"}},
			{Name: "virtualmachineinstances/vnc/screenshot", Namespaced: true, Verbs: []string{"get"}},
			{Name: "virtualmachineinstances/guestosinfo", Namespaced: true, Verbs: []string{"get"}},
			{Name: "virtualmachineinstances/userlist", Namespaced: true, Verbs: []string{"get"}},
			{Name: "virtualmachines/restart", Namespaced: true, Verbs: []string{"update"}},
			{Name: "virtualmachines/start", Namespaced: true, Verbs: []string{"update"}},
			{Name: "virtualmachines/stop", Namespaced: true, Verbs: []string{"update"}},
		},
	})
}
