package mutate

import (
	"encoding/json"
	"strconv"
)

// Reading the request's raw object one level at a time, without copying:
// the values are sub-slices of the request's bytes. The bytes are valid
// JSON (DecodeVM decoded them), so the scanner does not check them again.

// rawObject decodes one level of a raw JSON object: its members, the
// values still raw.
func rawObject(raw json.RawMessage) (map[string]json.RawMessage, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '{' {
		return nil, false
	}
	out := map[string]json.RawMessage{}
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] == '"' {
		end := skipString(raw, i)
		key, ok := unquote(raw[i:end])
		if !ok {
			return nil, false
		}
		i = skipSpace(raw, end) + 1 // past ':'
		start := skipSpace(raw, i)
		end = skipValue(raw, start)
		out[key] = raw[start:end:end]
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return out, true
}

// rawChild is the member key of a raw JSON object, or the item of a raw
// JSON list at index key; ok is false when raw is neither.
func rawChild(raw json.RawMessage, key string) (child json.RawMessage, ok bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) {
		return nil, false
	}
	switch raw[i] {
	case '{':
		for i = skipSpace(raw, i+1); i < len(raw) && raw[i] == '"'; {
			end := skipString(raw, i)
			k, _ := unquote(raw[i:end])
			start := skipSpace(raw, skipSpace(raw, end)+1)
			end = skipValue(raw, start)
			if k == key {
				return raw[start:end:end], true
			}
			if i = skipSpace(raw, end); i < len(raw) && raw[i] == ',' {
				i = skipSpace(raw, i+1)
			}
		}
		return nil, true
	case '[':
		items, _ := rawList(raw)
		n, err := strconv.Atoi(key)
		if err != nil || n < 0 || n >= len(items) {
			return nil, true
		}
		return items[n], true
	}
	return nil, false
}

// rawList decodes one level of a raw JSON list.
func rawList(raw json.RawMessage) ([]json.RawMessage, bool) {
	i := skipSpace(raw, 0)
	if i >= len(raw) || raw[i] != '[' {
		return nil, false
	}
	var out []json.RawMessage
	i = skipSpace(raw, i+1)
	for i < len(raw) && raw[i] != ']' {
		end := skipValue(raw, i)
		out = append(out, raw[i:end:end])
		i = skipSpace(raw, end)
		if i < len(raw) && raw[i] == ',' {
			i = skipSpace(raw, i+1)
		}
	}
	return out, true
}

// unquote is a JSON string's value; without escapes it costs one copy.
func unquote(s []byte) (string, bool) {
	for _, c := range s[1 : len(s)-1] {
		if c == '\\' {
			var out string
			return out, json.Unmarshal(s, &out) == nil
		}
	}
	return string(s[1 : len(s)-1]), true
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString is the index after the string starting at b[i].
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return i
}

// skipValue is the index after the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
		return i
	}
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\t' && b[i] != '\n' && b[i] != '\r' {
		i++
	}
	return i
}
