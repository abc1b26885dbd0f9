package mutate

import (
	"strings"
	"testing"
)

// TestDecodeVMKeyCase: keys match the Go types' JSON names
// case-sensitively, as the API server matches them. A key the types do not
// know is kept (a newer KubeVirt's field), a known field's name in another
// case is refused with the name that was meant, and map keys (labels,
// annotations) are the user's, whatever their case.
func TestDecodeVMKeyCase(t *testing.T) {
	cases := map[string]struct {
		raw     string
		wantErr string
	}{
		"plain VM":                                           {raw: `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"a","labels":{"x":"1"}},"spec":{"template":{"spec":{"domain":{"devices":{"interfaces":[{"name":"default","masquerade":{}}]}}}}}}`},
		"unknown fields":                                     {raw: `{"metadata":{"name":"a"},"spec":{"future":{"Nested":{"A":1}},"template":{"spec":{"someday":true}}}}`},
		"map keys are free":                                  {raw: `{"metadata":{"annotations":{"Interfaces":"x","virtstation.io/mac":"auto"}}}`},
		"self-encoding values":                               {raw: `{"metadata":{"creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"template":{"spec":{"domain":{"resources":{"requests":{"memory":"1Gi"}}}}}}}`},
		"known key in another case":                          {raw: `{"spec":{"template":{"spec":{"domain":{"devices":{"Interfaces":[{"name":"default"}]}}}}}}`, wantErr: `decode VirtualMachine: field .spec.template.spec.domain.devices.Interfaces: keys are case-sensitive, want "interfaces"`},
		"known key in another case, empty":                   {raw: `{"spec":{"template":{"spec":{"domain":{"devices":{"Interfaces":[]}}}}}}`, wantErr: `want "interfaces"`},
		"known key in another case in a list item":           {raw: `{"spec":{"template":{"spec":{"domain":{"devices":{"interfaces":[{"name":"a"},{"Name":"b"}]}}}}}}`, wantErr: `field .spec.template.spec.domain.devices.interfaces[1].Name: keys are case-sensitive, want "name"`},
		"keys differing only in case in a map":               {raw: `{"metadata":{"labels":{"a":"1","A":"2"}}}`},
		"keys differing only in case below an unknown field": {raw: `{"spec":{"future":{"a":1,"A":2}}}`},
		"a value of the wrong type":                          {raw: `{"spec":{"template":"yes"}}`, wantErr: "decode VirtualMachine"},
		// The typed view would keep one copy, the raw reading another.
		"a key given twice": {raw: `{"spec":{"template":{"spec":{"volumes":[{"name":"a"}],"volumes":[]}}}}`, wantErr: `duplicate field "spec.template.spec.volumes"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeVM([]byte(tc.raw))
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("DecodeVM = %v, want no error", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("DecodeVM = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}
