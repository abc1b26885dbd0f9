package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/virtstation/virtstation/api"
	"github.com/virtstation/virtstation/render"
)

// keyPrefix is the prefix of Virtstation's label and annotation keys.
const keyPrefix = "virtstation.io/"

// knownAnnotations are the virtstation.io/ annotations Virtstation reads or
// writes: on a managed VM (set by its user, or recorded by the webhook), and
// on a data disk (its claims).
var knownAnnotations = []string{
	api.AnnotationMAC, api.AnnotationDataDisks, api.AnnotationGPUs,
	api.AnnotationSSHUser, api.AnnotationSSHPropagation, api.AnnotationVideo,
	api.AnnotationSharedMemory, api.AnnotationUserData,
	api.AnnotationInjected, api.AnnotationPolicyRevision,
	api.AnnotationClaimedBy, api.AnnotationClaimedAt, api.AnnotationSharedBy, api.AnnotationClaimUIDs,
	api.AnnotationIdleTimeout, api.AnnotationIdleGracePeriod, api.AnnotationMaxKeepRunning,
	api.AnnotationKeepRunningUntil, api.AnnotationIdleStopUnsafe,
	api.AnnotationIdleStopAt, api.AnnotationIdleStop,
}

// knownLabels are the virtstation.io/ labels that opt objects in.
var knownLabels = []string{api.LabelManaged, api.LabelDataDisk, api.LabelSSHPublicKey, api.LabelPolicy}

// unknownKeyWarnings warns of each virtstation.io/ label or annotation key
// of obj (read from file) that Virtstation does not know, which it would
// ignore: most likely a typo of one it does, which it names.
func unknownKeyWarnings(file string, obj render.Object, namespace string) []string {
	md, _ := obj["metadata"].(map[string]any)
	if md == nil {
		return nil
	}
	kind, _ := obj["kind"].(string)
	name, _ := md["name"].(string)
	if name == "" {
		name, _ = md["generateName"].(string)
	}
	if ns, _ := md["namespace"].(string); ns != "" {
		namespace = ns
	}
	var out []string
	check := func(field, what, isOther string, known, otherKnown []string) {
		m, _ := md[field].(map[string]any)
		keys := make([]string, 0, len(m))
		for k := range m {
			if strings.HasPrefix(k, keyPrefix) && !slices.Contains(known, k) {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			msg := fmt.Sprintf("%s: %s %s/%s: unknown %s %q, which Virtstation ignores", file, kind, namespace, name, what, k)
			if s := closestKey(k, known); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			if slices.Contains(otherKnown, k) {
				msg += fmt.Sprintf(" (%s %s)", k, isOther)
			}
			out = append(out, msg)
		}
	}
	check("annotations", "annotation", "is a label, not an annotation", knownAnnotations, knownLabels)
	check("labels", "label", "is an annotation, not a label", knownLabels, knownAnnotations)
	return out
}

// closestKey is the key of known nearest to k, if it is near enough to be
// what was meant (at most 2 edits, or a third of its length).
func closestKey(k string, known []string) string {
	best, bestDist := "", -1
	for _, c := range known {
		if d := editDistance(k, c); bestDist < 0 || d < bestDist {
			best, bestDist = c, d
		}
	}
	if bestDist < 0 || bestDist > max(2, (len(best)-len(keyPrefix))/3) {
		return ""
	}
	return best
}

// editDistance is the Levenshtein distance between a and b, in bytes.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// duplicateKeyWarnings warns of each key given twice in one YAML mapping
// of data (read from file): the decoder render uses keeps the last value
// silently. It names the file and the lines of both. Documents that do not
// parse are left to the decoder, which reports them.
func duplicateKeyWarnings(file string, data []byte) []string {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var out []string
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) || err != nil {
			return out
		}
		out = appendDuplicates(out, file, &doc, "")
	}
}

// appendDuplicates appends the warnings for the duplicate keys in node and
// below it; path is node's place in its document (a.b[2].c).
func appendDuplicates(out []string, file string, node *yaml.Node, path string) []string {
	switch node.Kind {
	case yaml.DocumentNode:
		for _, c := range node.Content {
			out = appendDuplicates(out, file, c, path)
		}
	case yaml.SequenceNode:
		for i, c := range node.Content {
			out = appendDuplicates(out, file, c, fmt.Sprintf("%s[%d]", path, i))
		}
	case yaml.MappingNode:
		first := map[string]int{}
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				continue
			}
			if line, dup := first[k.Value]; dup {
				out = append(out, fmt.Sprintf("%s:%d: duplicate key %q in %s (first on line %d): the last value is used",
					file, k.Line, k.Value, cmp.Or(path, "the document"), line))
			} else {
				first[k.Value] = k.Line
			}
			child := k.Value
			if path != "" {
				child = path + "." + k.Value
			}
			out = appendDuplicates(out, file, v, child)
		}
	}
	return out
}
