package histories

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"olympos.io/encoding/edn"
)

// looksLikeJepsenJSON reports whether data is Jepsen's ops in JSON rather
// than lockprover's JSON lines: one JSON array (lockprover never writes
// one), or JSON lines whose first op that names a process other than the
// nemesis names it by a number, as Jepsen numbers its clients (lockprover
// names them by strings).
func looksLikeJepsenJSON(data []byte) bool {
	data = bytes.TrimLeft(data, " \t\r\n")
	if len(data) > 0 && data[0] == '[' {
		return true
	}
	for len(data) > 0 {
		line := data
		if i := bytes.IndexByte(data, '\n'); i >= 0 {
			line, data = data[:i], data[i+1:]
		} else {
			data = nil
		}
		var op struct {
			Process json.RawMessage `json:"process"`
		}
		if json.Unmarshal(line, &op) != nil {
			return false
		}
		p := bytes.TrimSpace(op.Process)
		switch {
		case len(p) == 0 || string(p) == `"nemesis"` || string(p) == `":nemesis"`:
			continue
		case p[0] == '"':
			return false
		}
		return p[0] == '-' || p[0] >= '0' && p[0] <= '9'
	}
	return false
}

// parseJepsenJSON reads Jepsen's ops in JSON, as Jepsen's tools export a
// history: one JSON array of op maps, or one op map per line. Keys and
// keyword values are strings, with or without their colon ("type":
// "invoke" or ":invoke"); everything else is read as in EDN.
func parseJepsenJSON(data []byte, name string) ([]Event, *Imported, error) {
	fail := func(line int, format string, args ...any) ([]Event, *Imported, error) {
		return nil, nil, &Error{File: name, Line: line, Msg: fmt.Sprintf(format, args...)}
	}
	type raw struct {
		text []byte
		line int
	}
	var raws []raw
	lineAt := func(off int64) int { return 1 + bytes.Count(data[:off], []byte{'\n'}) }
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '[' {
		dec := json.NewDecoder(bytes.NewReader(data))
		if _, err := dec.Token(); err != nil {
			return fail(1, "invalid JSON: %v", err)
		}
		for dec.More() {
			off := dec.InputOffset()
			for off < int64(len(data)) && strings.IndexByte(" \t\r\n,", data[off]) >= 0 {
				off++
			}
			var m json.RawMessage
			if err := dec.Decode(&m); err != nil {
				return fail(lineAt(off), "invalid JSON: %v", err)
			}
			raws = append(raws, raw{m, lineAt(off)})
		}
		if _, err := dec.Token(); err != nil {
			return fail(lineAt(dec.InputOffset()), "invalid JSON: %v", err)
		}
		if rest := bytes.TrimSpace(data[dec.InputOffset():]); len(rest) > 0 {
			return fail(lineAt(dec.InputOffset()), "want one JSON array of op maps, got more after it")
		}
	} else {
		for i, line := range bytes.Split(data, []byte{'\n'}) {
			if len(bytes.TrimSpace(line)) > 0 {
				raws = append(raws, raw{line, i + 1})
			}
		}
	}
	ops := make([]jop, 0, len(raws))
	for _, r := range raws {
		dec := json.NewDecoder(bytes.NewReader(r.text))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			return fail(r.line, "invalid JSON: %v", err)
		}
		if dec.More() {
			return fail(r.line, "want one JSON op map per line, got more after it")
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return fail(r.line, "want an op map such as {\"type\":\"invoke\",\"f\":\"acquire\",\"process\":0}, got %s", shorten(string(r.text)))
		}
		m := map[any]any{}
		for k, x := range obj {
			k = strings.TrimPrefix(k, ":")
			switch k {
			case "type", "f":
				if s, ok := x.(string); ok {
					x = edn.Keyword(strings.TrimPrefix(s, ":"))
				}
			case "process":
				if s, ok := x.(string); ok && strings.TrimPrefix(s, ":") == "nemesis" {
					x = edn.Keyword("nemesis")
				}
			}
			m[edn.Keyword(k)] = fromJSON(x)
		}
		o, msg := decodeOp(m, r.line)
		if msg != "" {
			return fail(r.line, "%s", msg)
		}
		ops = append(ops, o)
	}
	return convert(ops, FormatJSON, name)
}

// fromJSON turns a decoded JSON value into what the EDN decoder gives:
// integers as int64, other numbers as float64.
func fromJSON(x any) any {
	switch x := x.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case []any:
		out := make([]any, len(x))
		for i, y := range x {
			out[i] = fromJSON(y)
		}
		return out
	case map[string]any:
		out := map[any]any{}
		for k, y := range x {
			out[k] = fromJSON(y)
		}
		return out
	}
	return x
}
