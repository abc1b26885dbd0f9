package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/open-policy-agent/opa/v1/ast"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/virtstation/virtstation/api"
)

// DiskState is what the webhook knows about one disk named in the VM's
// virtstation.io/data-disks annotation or attached by its volumes (see
// VolumeDisk), read from informer caches: input.disks in the policies.
type DiskState struct {
	// Exists: a DataVolume or PVC of that name exists in the VM's namespace.
	Exists bool `json:"exists"`
	// Labelled: it carries virtstation.io/data-disk=true.
	Labelled bool `json:"labelled"`
	// Kind is DataVolume or PersistentVolumeClaim; empty when it does not exist.
	Kind string `json:"kind"`
	// ClaimedBy is the VM ("ns/name") holding the writable claim, if any.
	ClaimedBy string `json:"claimedBy"`
	// ClaimLive: that claim still holds (claims.Live: its VM exists and
	// attaches the disk, a VMI uses the disk, or it is younger than the
	// grace period).
	ClaimLive bool `json:"claimLive"`
	// SharedBy are the live read-only claims ("ns/name"), other than this VM.
	SharedBy []string `json:"sharedBy"`
	// UsedBy are the VMIs ("ns/name"), other than this VM's, whose volumes
	// use the disk.
	UsedBy []string `json:"usedBy"`
}

// value is the state as a policy input value.
func (s DiskState) value() map[string]any {
	return map[string]any{
		"exists":    s.Exists,
		"labelled":  s.Labelled,
		"kind":      s.Kind,
		"claimedBy": s.ClaimedBy,
		"claimLive": s.ClaimLive,
		"sharedBy":  nonNil(s.SharedBy),
		"usedBy":    nonNil(s.UsedBy),
	}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// dataDisksPath is the annotation's field path, as the policies write it.
var dataDisksPath = field.NewPath("metadata", "annotations").Key(api.AnnotationDataDisks)

// BuildInput builds the policy input document for one admission:
//
//	{operation, namespace, name, object, oldObject, userInfo,
//	 dataDisks: [{index, name, mountPath, type, bus, readOnly}],
//	 volumeDisks: [{index, name, field, volume, readOnly}],
//	 disks: {<name>: DiskState}}
//
// object and oldObject are the raw JSON of the request (oldObject may be
// empty). namespace and name default to the object's own. dataDisks is the
// parsed virtstation.io/data-disks annotation, with defaults filled in (bus
// stays "" when the entry names none: the mutation picks the architecture's,
// and object's spec shows it); it is empty when the annotation is absent or does not parse (the mutating
// webhook denies those). volumeDisks are the disks the object's volumes and
// dataVolumeTemplates attach outside the annotation (ParseVolumeDisks), each
// with the field path that names it. userInfo is the admission request's user (any
// JSON-encodable value, or nil). The result holds only JSON-like values, so
// it converts to a Rego value quickly; BuildInput never panics.
//
// It is the document DecodeRequest followed by Request.Input gives, with
// the object decoded at once.
func BuildInput(op, namespace, name string, object, oldObject []byte, userInfo any, disks map[string]DiskState) (map[string]any, error) {
	obj, err := decodeJSON(object)
	if err != nil {
		return nil, fmt.Errorf("decode object: %w", err)
	}
	objMap, ok := obj.(map[string]any)
	if !ok {
		return nil, errors.New("decode object: not a JSON object")
	}
	r := Request{Operation: op, OldObject: oldObject, UserInfo: userInfo, decoded: objMap}
	r.metadataValue = objMap["metadata"]
	r.metadata, _ = r.metadataValue.(map[string]any)
	r.defaultNames(namespace, name)
	r.parseDataDisks()
	if spec, ok := objMap["spec"]; ok {
		raw, err := json.Marshal(spec)
		if err != nil {
			return nil, fmt.Errorf("encode spec: %w", err)
		}
		if err := r.parseVolumes(raw); err != nil {
			return nil, err
		}
	}
	return r.Input(disks)
}

// Request is one admission as the policies see it, decoded once: the
// validating webhook reads the annotation, name and deletion timestamp from
// it, and evaluates it on each claim attempt (Engine.EvaluateRequest)
// without decoding it again. Only the object's metadata is decoded up
// front; its other top-level fields, oldObject and userInfo are decoded
// when the policies read them.
type Request struct {
	// Operation is CREATE or UPDATE.
	Operation string
	// Namespace and Name are the request's, or else the object's own.
	Namespace, Name string
	// OldObject is the stored object's raw JSON (UPDATE), possibly empty.
	OldObject []byte
	// UserInfo is the request's user (any JSON-encodable value, or nil).
	UserInfo any

	// fields are the object's top-level fields, raw; decoded is the whole
	// object instead, when it was decoded at once (BuildInput).
	fields  map[string]json.RawMessage
	decoded map[string]any
	// metadata is fields["metadata"] decoded (nil when it is not an
	// object), and metadataValue as it is in the input document.
	metadata      map[string]any
	metadataValue any
	// dataDisks is the virtstation.io/data-disks annotation, parsed once
	// (nil when it is absent or dataDiskErrs is set).
	dataDisks    []api.DataDisk
	dataDiskErrs field.ErrorList
	// volumeDisks are the disks the spec attaches outside the annotation.
	volumeDisks []VolumeDisk
}

// DecodeRequest reads the request's object. It fails when object is not
// one JSON object; oldObject and userInfo are checked when they are used.
func DecodeRequest(op, namespace, name string, object, oldObject []byte, userInfo any) (Request, error) {
	if t := bytes.TrimLeft(object, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		if _, err := decodeJSON(object); err != nil {
			return Request{}, fmt.Errorf("decode object: %w", err)
		}
		return Request{}, errors.New("decode object: not a JSON object")
	}
	var fields map[string]json.RawMessage
	if err := decodeExactlyOne(object, &fields); err != nil {
		return Request{}, fmt.Errorf("decode object: %w", err)
	}
	r := Request{Operation: op, OldObject: oldObject, UserInfo: userInfo, fields: fields}
	if raw, ok := fields["metadata"]; ok {
		v, err := decodeJSON(raw)
		if err != nil {
			return Request{}, fmt.Errorf("decode object: %w", err)
		}
		r.metadataValue = v
		r.metadata, _ = v.(map[string]any)
	}
	r.defaultNames(namespace, name)
	r.parseDataDisks()
	if err := r.parseVolumes(fields["spec"]); err != nil {
		return Request{}, err
	}
	return r, nil
}

// parseDataDisks parses the virtstation.io/data-disks annotation, the one
// time a request's is parsed: the claim targets, the volume disks and the
// policy input all read the result.
func (r *Request) parseDataDisks() {
	r.dataDisks, r.dataDiskErrs = api.ParseDataDisks(r.DataDisksSpec(), dataDisksPath)
	if len(r.dataDiskErrs) > 0 {
		r.dataDisks = nil
	}
}

// DataDisks is the parsed virtstation.io/data-disks annotation, with
// defaults filled in (a cdrom is ReadOnly); nil when it is absent or does
// not parse (DataDiskErrors).
func (r Request) DataDisks() []api.DataDisk {
	return r.dataDisks
}

// DataDiskErrors are the annotation's parse errors. The mutating webhook,
// which runs first, denies such a VM; the policies see no data disks for it.
func (r Request) DataDiskErrors() field.ErrorList {
	return r.dataDiskErrs
}

// parseVolumes reads the disks the spec attaches outside the annotation.
func (r *Request) parseVolumes(spec []byte) error {
	annotated := make([]string, 0, len(r.dataDisks))
	for _, d := range r.dataDisks {
		annotated = append(annotated, d.Name)
	}
	v, err := ParseVolumeDisks(spec, annotated)
	if err != nil {
		return fmt.Errorf("decode object: %w", err)
	}
	r.volumeDisks = v
	return nil
}

// VolumeDisks are the disks the object's volumes and dataVolumeTemplates
// attach that its virtstation.io/data-disks annotation does not name.
func (r Request) VolumeDisks() []VolumeDisk {
	return r.volumeDisks
}

// defaultNames sets Namespace and Name, defaulting to the object's own.
func (r *Request) defaultNames(namespace, name string) {
	if namespace == "" {
		namespace, _ = r.metadata["namespace"].(string)
	}
	if name == "" {
		name, _ = r.metadata["name"].(string)
	}
	r.Namespace, r.Name = namespace, name
}

// DataDisksSpec is the object's virtstation.io/data-disks annotation; ""
// when it is absent or not a string.
func (r Request) DataDisksSpec() string {
	annotations, _ := r.metadata["annotations"].(map[string]any)
	spec, _ := annotations[api.AnnotationDataDisks].(string)
	return spec
}

// Deleting reports whether the object has a deletion timestamp.
func (r Request) Deleting() bool {
	ts, ok := r.metadata["deletionTimestamp"]
	return ok && ts != nil
}

// object is the decoded object, with only the top-level fields reads
// covers (all of them for a nil shape).
func (r Request) object(reads *inputShape) (map[string]any, error) {
	if r.decoded != nil {
		return r.decoded, nil
	}
	obj := make(map[string]any, len(r.fields))
	for k, raw := range r.fields {
		if reads != nil && !reads.all {
			if _, ok := reads.keys[k]; !ok {
				continue
			}
		}
		if k == "metadata" {
			obj[k] = r.metadataValue
			continue
		}
		v, err := decodeJSON(raw)
		if err != nil {
			return nil, fmt.Errorf("decode object: %w", err)
		}
		obj[k] = v
	}
	return obj, nil
}

// Input is the whole input document (see BuildInput) for the disks' state.
func (r Request) Input(disks map[string]DiskState) (map[string]any, error) {
	return r.input(disks, nil)
}

// input builds the input document's top-level keys that reads covers (all
// of them for a nil shape). oldObject and userInfo, whose conversion costs
// a JSON decode each, are left out when the policies do not read them.
func (r Request) input(disks map[string]DiskState, reads *inputShape) (map[string]any, error) {
	read := func(key string) bool {
		if reads == nil || reads.all {
			return true
		}
		_, ok := reads.keys[key]
		return ok
	}
	in := map[string]any{
		"operation": r.Operation,
		"namespace": r.Namespace,
		"name":      r.Name,
		"oldObject": nil,
		"userInfo":  nil,
	}
	if read("object") {
		var objReads *inputShape
		if reads != nil && !reads.all {
			objReads = reads.keys["object"]
		}
		obj, err := r.object(objReads)
		if err != nil {
			return nil, &badInputError{err}
		}
		in["object"] = obj
	}
	if read("oldObject") && len(bytes.TrimSpace(r.OldObject)) > 0 {
		old, err := decodeJSON(r.OldObject)
		if err != nil {
			return nil, &badInputError{fmt.Errorf("decode oldObject: %w", err)}
		}
		in["oldObject"] = old
	}
	if read("userInfo") {
		user, err := jsonValue(r.UserInfo)
		if err != nil {
			return nil, &badInputError{fmt.Errorf("encode userInfo: %w", err)}
		}
		in["userInfo"] = user
	}
	if read("dataDisks") {
		in["dataDisks"] = dataDisksValue(r.dataDisks)
	}
	if read("volumeDisks") {
		in["volumeDisks"] = volumeDisksValue(r.volumeDisks)
	}
	if read("disks") {
		diskValues := make(map[string]any, len(disks))
		for n, s := range disks {
			diskValues[n] = s.value()
		}
		in["disks"] = diskValues
	}
	return in, nil
}

// badInputError is a request that no input document can be built from.
type badInputError struct{ err error }

func (e *badInputError) Error() string { return e.err.Error() }
func (e *badInputError) Unwrap() error { return e.err }

// dataDisksValue is the input's dataDisks list of the parsed annotation.
func dataDisksValue(parsed []api.DataDisk) []any {
	out := make([]any, len(parsed))
	for i, d := range parsed {
		out[i] = map[string]any{
			"index":     i,
			"name":      d.Name,
			"mountPath": d.MountPath,
			"type":      string(d.Type),
			"bus":       d.Bus,
			"readOnly":  d.ReadOnly,
		}
	}
	return out
}

// volumeDisksValue is the input's volumeDisks list.
func volumeDisksValue(disks []VolumeDisk) []any {
	out := make([]any, len(disks))
	for i, d := range disks {
		out[i] = map[string]any{
			"index":    i,
			"name":     d.Name,
			"field":    d.Field,
			"volume":   d.Volume,
			"readOnly": d.ReadOnly,
		}
	}
	return out
}

// decodeJSON decodes exactly one JSON value, keeping numbers exact.
func decodeJSON(b []byte) (any, error) {
	var v any
	if err := decodeExactlyOne(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// decodeExactlyOne decodes exactly one JSON value into v, keeping numbers
// exact.
func decodeExactlyOne(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// jsonValue converts v to maps, slices and scalars through JSON.
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case map[string]any, string, bool:
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return decodeJSON(b)
}

// inputShape is the part of the input document a policy set reads: the
// whole of it (all), or only some keys, each with its own shape. Evaluate
// converts only that part to a Rego value, which saves most of the
// conversion of object and oldObject (the shipped policies read only the
// object's annotations).
type inputShape struct {
	all  bool
	keys map[string]*inputShape
}

// readInput returns what the compiled modules read of input. Every
// reference to input counts, down to its first non-constant key; a bare
// input (passed to a function, compared, walked) reads all of it. The
// targets of `with input... as` replace input rather than read it.
func readInput(c *ast.Compiler) *inputShape {
	root := &inputShape{keys: map[string]*inputShape{}}
	var visit func(x any) bool
	visit = func(x any) bool {
		switch x := x.(type) {
		case *ast.With:
			ast.NewGenericVisitor(visit).Walk(x.Value)
			return true
		case ast.Ref:
			if !x.HasPrefix(ast.InputRootRef) {
				return false
			}
			root.add(x[1:])
			for _, t := range x[1:] {
				ast.NewGenericVisitor(visit).Walk(t)
			}
			return true
		case ast.Var:
			if x.Equal(ast.InputRootDocument.Value) {
				root.all = true
			}
		}
		return false
	}
	for _, m := range c.Modules {
		ast.NewGenericVisitor(visit).Walk(m)
	}
	return root
}

// add marks the path (up to its first non-string key) as read.
func (s *inputShape) add(path ast.Ref) {
	for _, t := range path {
		if s.all {
			return
		}
		k, ok := t.Value.(ast.String)
		if !ok {
			break
		}
		next, ok := s.keys[string(k)]
		if !ok {
			next = &inputShape{keys: map[string]*inputShape{}}
			s.keys[string(k)] = next
		}
		s = next
	}
	s.all, s.keys = true, nil
}

// prune returns the part of v the shape covers.
func (s *inputShape) prune(v any) any {
	if s == nil || s.all {
		return v
	}
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := make(map[string]any, len(s.keys))
	for k, sub := range s.keys {
		if child, ok := m[k]; ok {
			out[k] = sub.prune(child)
		}
	}
	return out
}
