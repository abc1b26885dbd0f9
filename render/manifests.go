package render

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// maxDocumentBytes caps one YAML document; a VirtualMachine is a few KiB.
const maxDocumentBytes = 4 << 20

// Object is one decoded manifest.
type Object = map[string]any

// ReadObjects splits multi-document YAML (or JSON) into objects, skipping
// empty documents and expanding kind: List. Every object must have a kind.
func ReadObjects(r io.Reader) ([]Object, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReaderSize(r, 64<<10))
	var out []Object
	for i := 1; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(doc) > maxDocumentBytes {
			return nil, fmt.Errorf("document %d: larger than %d bytes", i, maxDocumentBytes)
		}
		if len(bytes.TrimSpace(stripComments(doc))) == 0 {
			continue
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var obj Object
		if err := json.Unmarshal(js, &obj); err != nil {
			return nil, fmt.Errorf("document %d: want an object: %w", i, err)
		}
		if obj == nil {
			continue
		}
		kind, _ := obj["kind"].(string)
		if kind == "" {
			return nil, fmt.Errorf("document %d: no kind", i)
		}
		if kind == "List" {
			items, _ := obj["items"].([]any)
			for j, it := range items {
				m, ok := it.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("document %d: item %d is not an object", i, j)
				}
				out = append(out, m)
			}
			continue
		}
		out = append(out, obj)
	}
}

// stripComments drops YAML comment lines, so a document of only comments
// counts as empty.
func stripComments(doc []byte) []byte {
	var b bytes.Buffer
	for _, line := range bytes.Split(doc, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] == '#' {
			continue
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes()
}
