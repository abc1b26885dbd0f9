package mutate

import (
	"context"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/virtstation/virtstation/api"
)

// TestDataDiskIsTheObjectTheValidatorJudges: the disk a data-disks entry
// attaches is the one disks.Lookup names (the DataVolume, else the PVC),
// the object the validating webhook then judges, and it must be labelled.
// A labelled PVC whose DataVolume is not labelled is not attached behind
// the DataVolume's back.
func TestDataDiskIsTheObjectTheValidatorJudges(t *testing.T) {
	dataDisk := map[string]string{api.LabelDataDisk: api.LabelTrue}
	tests := map[string]struct {
		add      func(c *StaticCluster)
		wantKind string // "" means denied
	}{
		"a labelled DataVolume": {
			add:      func(c *StaticCluster) { c.AddDataDisk(api.KindDataVolume, "ns", "home", dataDisk) },
			wantKind: api.KindDataVolume,
		},
		"a labelled PVC": {
			add:      func(c *StaticCluster) { c.AddDataDisk(api.KindPVC, "ns", "home", dataDisk) },
			wantKind: api.KindPVC,
		},
		"a labelled DataVolume and its labelled PVC": {
			add: func(c *StaticCluster) {
				c.AddDataDisk(api.KindPVC, "ns", "home", dataDisk)
				c.AddDataDisk(api.KindDataVolume, "ns", "home", dataDisk)
			},
			wantKind: api.KindDataVolume,
		},
		"a labelled PVC under an unlabelled DataVolume": {
			add: func(c *StaticCluster) {
				c.AddDataDisk(api.KindDataVolume, "ns", "home", nil)
				c.AddDataDisk(api.KindPVC, "ns", "home", dataDisk)
			},
		},
	}
	raw := `{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachine","metadata":{"name":"vm","namespace":"ns",
"labels":{"virtstation.io/managed":"true"},"annotations":{"virtstation.io/mac":"off","virtstation.io/data-disks":"home"}},
"spec":{"runStrategy":"Halted","template":{"spec":{"domain":{"devices":{}}}}}}`
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			vm, err := DecodeVM([]byte(raw))
			if err != nil {
				t.Fatal(err)
			}
			c := NewStaticCluster(nil)
			tc.add(c)
			res, err := Mutate(context.Background(), Input{Operation: admissionv1.Create, Namespace: "ns", Name: "vm", Object: []byte(raw), VM: vm}, c)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantKind == "" {
				if len(res.Denied) != 1 || res.Denied[0].Field != "metadata.annotations[virtstation.io/data-disks][0].name" ||
					!strings.Contains(res.Denied[0].Detail, "labelled "+api.LabelDataDisk+"=true") {
					t.Fatalf("denied = %v, want one denial of entry 0 saying the disk must be labelled", res.Denied)
				}
				return
			}
			if len(res.Denied) > 0 {
				t.Fatalf("denied: %v", res.Denied)
			}
			if got := res.Injected.DataDisks; len(got) != 1 || got[0].Kind != tc.wantKind {
				t.Fatalf("attached %+v, want home as a %s", got, tc.wantKind)
			}
		})
	}
}
