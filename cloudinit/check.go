package cloudinit

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

	"go.yaml.in/yaml/v2"
)

// CloudConfigError says why cloud-init would ignore a user's #cloud-config
// document: cloud-init 22.4 loads it with PyYAML's safe loader, and on a
// YAML error, or a top level that is not a mapping, it logs a warning and
// goes on as if the document were empty (util.load_yaml).
type CloudConfigError struct {
	// Line is the 1-based line of the user-data the YAML parser names
	// first, as PyYAML (and so cloud-init's log) does: for a construct left
	// open, such as an unclosed [ list, the line it opened on. 0 when the
	// parser did not say.
	Line int
	// Problem is the parser's message without its "yaml: line N:" prefix,
	// or what is wrong with the top level.
	Problem string
}

// Error implements error.
func (e *CloudConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Problem)
	}
	return e.Problem
}

// yamlLineRE picks the line out of a yaml.v2 syntax error.
var yamlLineRE = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// CheckCloudConfig reports, as a *CloudConfigError, why cloud-init would
// ignore user: it is a #cloud-config document (detected as cloud-init
// detects it) that is not YAML, holds more than one YAML document, or whose
// top level is not a mapping. Any other user-data (shell scripts, MIME,
// gzip, other cloud-config flavours), and an empty document, give nil.
//
// yaml.v2 reads YAML 1.1 as PyYAML does, and, like it, allows duplicate
// keys. The work is linear in len(user); yaml.v2 bounds alias expansion.
func CheckCloudConfig(user []byte) error {
	if detectType(user) != typeCloudConfig {
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(user))
	var doc any
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil // comments only
		}
		return yamlError(err)
	}
	var second any
	switch err := dec.Decode(&second); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return yamlError(err)
	default:
		return &CloudConfigError{Problem: "more than one YAML document (a second \"---\" line): cloud-config must be a single document"}
	}
	switch doc.(type) {
	case nil, map[any]any:
		return nil
	case []any:
		return &CloudConfigError{Problem: "the top level is a list; cloud-config must be a mapping of keys such as packages: or runcmd:"}
	default:
		return &CloudConfigError{Problem: "the top level is a single value; cloud-config must be a mapping of keys such as packages: or runcmd:"}
	}
}

// yamlError turns a yaml.v2 error into a CloudConfigError.
func yamlError(err error) *CloudConfigError {
	msg := err.Error()
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		if n, convErr := strconv.Atoi(m[1]); convErr == nil {
			return &CloudConfigError{Line: n, Problem: m[2]}
		}
	}
	if rest, ok := bytes.CutPrefix([]byte(msg), []byte("yaml: ")); ok {
		msg = string(rest)
	}
	return &CloudConfigError{Problem: msg}
}
