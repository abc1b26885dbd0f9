package mutate

import (
	"encoding/json"
	"testing"

	kubevirtv1 "kubevirt.io/api/core/v1"
)

// TestKeyCaseClean: the shortcut answers true only where the full check
// passes, and leaves every doubtful object to it.
func TestKeyCaseClean(t *testing.T) {
	cases := map[string]struct {
		raw       string
		wantClean bool
		wantErr   bool
	}{
		"plain VM":                                           {raw: `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"a","labels":{"x":"1"}},"spec":{"template":{"spec":{"domain":{"devices":{"interfaces":[{"name":"default","masquerade":{}}]}}}}}}`, wantClean: true},
		"unknown fields":                                     {raw: `{"metadata":{"name":"a"},"spec":{"future":{"Nested":{"A":1}},"template":{"spec":{"someday":true}}}}`, wantClean: true},
		"map keys are free":                                  {raw: `{"metadata":{"annotations":{"Interfaces":"x","virtstation.io/mac":"auto"}}}`, wantClean: true},
		"self-encoding values":                               {raw: `{"metadata":{"creationTimestamp":"2026-01-01T00:00:00Z"},"spec":{"template":{"spec":{"domain":{"resources":{"requests":{"memory":"1Gi"}}}}}}}`, wantClean: true},
		"known key in another case":                          {raw: `{"spec":{"template":{"spec":{"domain":{"devices":{"Interfaces":[{"name":"default"}]}}}}}}`, wantErr: true},
		"known key in another case, empty":                   {raw: `{"spec":{"template":{"spec":{"domain":{"devices":{"Interfaces":[]}}}}}}`},
		"keys differing only in case":                        {raw: `{"metadata":{"labels":{"a":"1","A":"2"}}}`, wantErr: true},
		"keys differing only in case below an unknown field": {raw: `{"spec":{"future":{"a":1,"A":2}}}`},
		"object where a value encodes itself":                {raw: `{"metadata":{"creationTimestamp":{"Seconds":1}}}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var obj map[string]any
			if err := json.Unmarshal([]byte(tc.raw), &obj); err != nil {
				t.Fatal(err)
			}
			vm := &kubevirtv1.VirtualMachine{}
			_ = json.Unmarshal([]byte(tc.raw), vm) // a type error leaves the rest decoded
			if got := keyCaseClean(obj, vmType); got != tc.wantClean {
				t.Errorf("keyCaseClean = %v, want %v", got, tc.wantClean)
			}
			err := checkKeyCaseEncoded(obj, vm)
			if (err != nil) != tc.wantErr {
				t.Errorf("checkKeyCaseEncoded = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantClean && err != nil {
				t.Errorf("keyCaseClean passed what the full check rejects: %v", err)
			}
		})
	}
}
