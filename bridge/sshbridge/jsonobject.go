package sshbridge

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// decodeObject decodes data, which must be exactly one JSON object, into the
// destinations named by fields. Unlike encoding/json it matches keys exactly
// (no case folding), rejects unknown and repeated keys, and rejects trailing
// data. A null value leaves its destination unchanged.
//
// Its errors never quote a value, only key names and byte offsets, because
// values may be secrets.
func decodeObject(data []byte, fields map[string]any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return errors.New("the message must be a JSON object")
	}
	seen := make(map[string]bool, len(fields))
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return jsonError(err)
		}
		key, _ := tok.(string) // inside an object, the decoder only yields string keys here
		dst, ok := fields[key]
		if !ok {
			return fmt.Errorf("unknown field %s", quoteName(key))
		}
		if seen[key] {
			return fmt.Errorf("field %s appears twice", quoteName(key))
		}
		seen[key] = true
		if err := dec.Decode(dst); err != nil {
			var syntax *json.SyntaxError
			if errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) {
				return jsonError(err)
			}
			return fmt.Errorf("field %s must be %s", quoteName(key), kindOf(dst))
		}
	}
	if _, err := dec.Token(); err != nil { // the closing brace
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

// jsonError describes a syntax error without quoting the input.
func jsonError(err error) error {
	var syntax *json.SyntaxError
	switch {
	case errors.As(err, &syntax):
		return fmt.Errorf("not valid JSON (at byte %d)", syntax.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("not valid JSON (truncated)")
	default:
		return errors.New("not valid JSON")
	}
}

// kindOf names what a destination accepts, for error messages.
func kindOf(dst any) string {
	switch dst.(type) {
	case *string:
		return "a string"
	case *int:
		return "an integer"
	default:
		return fmt.Sprintf("a %T", dst)
	}
}

// maxNameLen bounds how much of an unexpected key an error quotes.
const maxNameLen = 40

// quoteName quotes a client-supplied key for an error message, truncated.
func quoteName(s string) string {
	r := []rune(s)
	if len(r) > maxNameLen {
		return fmt.Sprintf("%q...", string(r[:maxNameLen]))
	}
	return fmt.Sprintf("%q", s)
}
