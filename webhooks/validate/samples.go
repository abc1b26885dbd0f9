package validate

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"strings"
	"sync"
)

// samplesFS holds the sample admission inputs the policy ConfigMap webhook
// times operator policies on (see CheckBudget).
//
//go:embed samples/*.json
var samplesFS embed.FS

// Sample is one representative VM admission: what the validating webhook
// would see for it, after the mutating webhook ran.
type Sample struct {
	// Name is the file name without .json, such as create-workstation.
	Name string
	// Description says what the admission is.
	Description string
	// Input is the policy input document (see BuildInput).
	Input map[string]any
}

// sampleFile is the JSON form of a sample.
type sampleFile struct {
	Description string               `json:"description"`
	Operation   string               `json:"operation"`
	UserInfo    any                  `json:"userInfo"`
	Object      json.RawMessage      `json:"object"`
	OldObject   json.RawMessage      `json:"oldObject"`
	Disks       map[string]DiskState `json:"disks"`
}

// Samples returns the embedded sample inputs, sorted by name: a typical
// managed workstation (data disks, a GPU, ssh, video) created and updated, a
// plain managed VM, and a VM the shipped rules deny. Callers must not
// change the inputs.
func Samples() []Sample { return samples() }

var samples = sync.OnceValue(func() []Sample {
	out, err := parseSamples(samplesFS)
	if err != nil {
		panic(fmt.Sprintf("embedded policy samples: %v", err)) // embedded at build time; TestSamples parses them
	}
	return out
})

// parseSamples reads every samples/*.json of fsys.
func parseSamples(fsys fs.FS) ([]Sample, error) {
	names, err := fs.Glob(fsys, "samples/*.json")
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(names))
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, err
		}
		s, err := parseSample(strings.TrimSuffix(path.Base(n), ".json"), b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// parseSample decodes one sample file into its policy input.
func parseSample(name string, b []byte) (Sample, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var f sampleFile
	if err := dec.Decode(&f); err != nil {
		return Sample{}, fmt.Errorf("decode sample: %w", err)
	}
	if f.Operation != "CREATE" && f.Operation != "UPDATE" {
		return Sample{}, fmt.Errorf("operation %q, want CREATE or UPDATE", f.Operation)
	}
	var old []byte
	if len(f.OldObject) > 0 && string(f.OldObject) != "null" {
		old = f.OldObject
	}
	in, err := BuildInput(f.Operation, "", "", f.Object, old, f.UserInfo, f.Disks)
	if err != nil {
		return Sample{}, err
	}
	return Sample{Name: name, Description: f.Description, Input: in}, nil
}
