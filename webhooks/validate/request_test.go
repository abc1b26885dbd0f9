package validate

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/virtstation/virtstation/api"
)

// TestRequestParsesDataDisksOnce: the annotation is parsed once, when the
// request is decoded; the claim targets, the volume disks and the policy
// input read that one result.
func TestRequestParsesDataDisksOnce(t *testing.T) {
	tests := map[string]struct {
		annotation  string
		wantTargets []ClaimTarget
		wantErrs    int
	}{
		"a disk and a cdrom, the cdrom claimed read-only": {
			annotation:  `[{"name":"home","mountPath":"/home"},{"name":"iso","type":"cdrom"}]`,
			wantTargets: []ClaimTarget{{Name: "home"}, {Name: "iso", ReadOnly: true}, {Name: "root", Direct: true}},
		},
		"an annotated disk its volumes also name is claimed once": {
			annotation:  `root:/data`,
			wantTargets: []ClaimTarget{{Name: "root"}},
		},
		"an annotation that does not parse claims nothing through it": {
			annotation:  `[{"name":"home","type":"floppy"}]`,
			wantTargets: []ClaimTarget{{Name: "root", Direct: true}},
			wantErrs:    1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			obj := `{"metadata":{"name":"vm","namespace":"ns","annotations":{"` + api.AnnotationDataDisks + `":` + quote(t, tc.annotation) + `}},
"spec":{"template":{"spec":{"domain":{"devices":{"disks":[{"name":"root","disk":{}}]}},"volumes":[{"name":"root","persistentVolumeClaim":{"claimName":"root"}}]}}}}`
			r, err := DecodeRequest("CREATE", "", "", []byte(obj), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := len(r.DataDiskErrors()); got != tc.wantErrs {
				t.Errorf("DataDiskErrors = %v, want %d", r.DataDiskErrors(), tc.wantErrs)
			}
			if got := ClaimTargets(r.DataDisks(), r.VolumeDisks()); !reflect.DeepEqual(got, tc.wantTargets) {
				t.Errorf("ClaimTargets = %+v, want %+v", got, tc.wantTargets)
			}
			in, err := r.Input(nil)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := len(in["dataDisks"].([]any)), len(r.DataDisks()); got != want {
				t.Errorf("input has %d dataDisks, want %d (the parsed annotation's)", got, want)
			}
		})
	}
}

func quote(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
