package prover

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// JudgedBy is how a plan was judged when it was found: the model
// ("strict" for the strict acquire-exact model, "" the standard one) and
// the properties whose violation counted (none: all), which a replay
// judges it by again. A family's plan embeds it, after its other fields,
// and so has Plan's Judged.
type JudgedBy struct {
	Model      string   `json:"model,omitempty"`
	Properties []string `json:"properties,omitempty"`
}

// Judged records how the plan was judged, for replays.
func (j *JudgedBy) Judged(model string, properties []string) {
	j.Model, j.Properties = model, properties
}

// A PlanError is something wrong with a plan, naming the field (as
// "nemesis[0].target"). A family's validation returns one so that
// ParsePlan can say where in the file the field is.
type PlanError struct {
	Field, Msg string
}

func (e *PlanError) Error() string { return "plan: " + e.Field + ": " + e.Msg }

// ParsePlan reads data, the plan file named path, into plan (a pointer to
// a family's plan struct) as strictly as histories are read, and then
// validates it with validate: an empty file, text that is not JSON, a value
// of the wrong type, an unknown field (field names are case-sensitive), a
// field twice, or a *PlanError from validate is an error that names the
// file, the line and column, and the field. Every family reads its plans
// with it, so that every plan file is read alike.
func ParsePlan(path string, data []byte, plan any, validate func() error) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return fmt.Errorf("%s: empty file: want a plan, a JSON object (lockprover prove writes them as plan.json)", path)
	}
	pos, err := strictJSON(data, reflect.TypeOf(plan).Elem())
	if err != nil {
		var je *jsonError
		if errors.As(err, &je) {
			return fmt.Errorf("%s:%s: %s", path, lineCol(data, je.off), je.msg)
		}
		return fmt.Errorf("%s: %v", path, err)
	}
	if err := json.Unmarshal(data, plan); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("%s:%s: %s: %v", path, lineCol(data, te.Offset), te.Field, err)
		}
		return fmt.Errorf("%s: %v", path, err)
	}
	if err := validate(); err != nil {
		var pe *PlanError
		if errors.As(err, &pe) {
			for f := pe.Field; f != ""; f = parentField(f) {
				if off, ok := pos[f]; ok {
					return fmt.Errorf("%s:%s: %s: %s", path, lineCol(data, off), pe.Field, pe.Msg)
				}
			}
			return fmt.Errorf("%s: %s: %s", path, pe.Field, pe.Msg)
		}
		return fmt.Errorf("%s: %v", path, err)
	}
	return nil
}

// parentField is the field that holds f: nemesis[0] for nemesis[0].target,
// clients[1] for clients[1][2], "" for a top-level field.
func parentField(f string) string {
	i := strings.LastIndexAny(f, ".[")
	if i < 0 {
		return ""
	}
	return f[:i]
}

// lineCol is line:column (from 1, in bytes) of offset off in data.
func lineCol(data []byte, off int64) string {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := off - int64(bytes.LastIndexByte(before, '\n'))
	return fmt.Sprintf("%d:%d", line, col)
}

// A jsonError is something wrong at byte offset off of a JSON text.
type jsonError struct {
	off int64
	msg string
}

func (e *jsonError) Error() string { return e.msg }

// strictJSON checks that data is one JSON value that fits t exactly: every
// object key is the json name of a field of the struct it fills (with the
// same case: encoding/json would accept any case), no key appears twice,
// and every value has the field's type. It returns the offset of every
// field's value, by path ("nemesis[0].target").
func strictJSON(data []byte, t reflect.Type) (map[string]int64, error) {
	w := &jsonWalker{dec: json.NewDecoder(bytes.NewReader(data)), data: data, pos: map[string]int64{}}
	w.dec.UseNumber()
	if err := w.value(t, ""); err != nil {
		return nil, err
	}
	off := w.next()
	if _, err := w.dec.Token(); err != io.EOF {
		return nil, &jsonError{off, "more than one JSON value: a plan file holds one object"}
	}
	return w.pos, nil
}

type jsonWalker struct {
	dec  *json.Decoder
	data []byte
	pos  map[string]int64
}

// next is the offset of the next token.
func (w *jsonWalker) next() int64 {
	off := w.dec.InputOffset()
	for off < int64(len(w.data)) && strings.IndexByte(" \t\r\n,:", w.data[off]) >= 0 {
		off++
	}
	return off
}

func (w *jsonWalker) token() (json.Token, int64, error) {
	off := w.next()
	tok, err := w.dec.Token()
	if err != nil {
		var se *json.SyntaxError
		switch {
		case errors.As(err, &se):
			return nil, se.Offset, &jsonError{se.Offset, "not JSON: " + se.Error()}
		case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
			return nil, off, &jsonError{off, "not JSON: the text ends in the middle of a value"}
		}
		return nil, off, &jsonError{off, "not JSON: " + err.Error()}
	}
	return tok, off, nil
}

func describe(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		if v == '{' {
			return "an object"
		}
		return "an array"
	case string:
		return fmt.Sprintf("the string %q", v)
	case json.Number:
		return "the number " + v.String()
	case bool:
		return fmt.Sprint(v)
	}
	return fmt.Sprint(tok)
}

// value reads the value of field (path) and checks it against t.
func (w *jsonWalker) value(t reflect.Type, field string) error {
	tok, off, err := w.token()
	if err != nil {
		if field != "" {
			err.(*jsonError).msg = field + ": " + err.(*jsonError).msg
		}
		return err
	}
	w.pos[field] = off
	name := field
	if name == "" {
		name = "the plan"
	}
	bad := func(want string) error {
		return &jsonError{off, fmt.Sprintf("%s: want %s, got %s", name, want, describe(tok))}
	}
	if t.Kind() == reflect.Pointer { // an optional value: null is its absence
		if tok == nil {
			return nil
		}
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if tok != json.Delim('{') {
			return bad("an object")
		}
		return w.object(t, field)
	case reflect.Slice:
		if tok == nil {
			return nil
		}
		if tok != json.Delim('[') {
			return bad("an array")
		}
		return w.array(t, field)
	case reflect.Map: // string keys, as encoding/json reads them
		if tok == nil {
			return nil
		}
		if tok != json.Delim('{') {
			return bad("an object")
		}
		return w.mapping(t, field)
	}
	if want := scalarMismatch(t, tok); want != "" {
		return bad(want)
	}
	return nil
}

// object reads the members of an object that fills struct t, after its
// '{', through its '}'.
func (w *jsonWalker) object(t reflect.Type, field string) error {
	fields := map[string]reflect.StructField{}
	for _, f := range reflect.VisibleFields(t) { // with an embedded struct's, as encoding/json reads them
		if n, _, _ := strings.Cut(f.Tag.Get("json"), ","); n != "" && n != "-" && f.IsExported() {
			fields[n] = f
		}
	}
	seen := map[string]bool{}
	for w.dec.More() {
		ktok, koff, err := w.token()
		if err != nil {
			return err
		}
		key, _ := ktok.(string)
		path := key
		if field != "" {
			path = field + "." + key
		}
		f, ok := fields[key]
		if !ok {
			return unknownField(fields, key, path, koff)
		}
		if seen[key] {
			return &jsonError{koff, fmt.Sprintf("%s: the field appears twice", path)}
		}
		seen[key] = true
		if err := w.value(f.Type, path); err != nil {
			return err
		}
	}
	_, _, err := w.token() // '}'
	return err
}

// unknownField is the error for key, which names no field of fields: a
// near miss in case, or the names it may be.
func unknownField(fields map[string]reflect.StructField, key, path string, off int64) error {
	var names []string
	for n := range fields {
		if strings.EqualFold(n, key) {
			return &jsonError{off, fmt.Sprintf("%s: unknown field (field names are case-sensitive: did you mean %q?)", path, n)}
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return &jsonError{off, fmt.Sprintf("%s: unknown field (want one of %s)", path, strings.Join(names, ", "))}
}

// mapping reads the members of an object that fills map t, after its
// '{', through its '}': any key, each once.
func (w *jsonWalker) mapping(t reflect.Type, field string) error {
	seen := map[string]bool{}
	for w.dec.More() {
		ktok, koff, err := w.token()
		if err != nil {
			return err
		}
		key, _ := ktok.(string)
		path := field + "." + key
		if seen[key] {
			return &jsonError{koff, fmt.Sprintf("%s: the field appears twice", path)}
		}
		seen[key] = true
		if err := w.value(t.Elem(), path); err != nil {
			return err
		}
	}
	_, _, err := w.token() // '}'
	return err
}

// array reads the elements of an array that fills slice t, after its '[',
// through its ']'.
func (w *jsonWalker) array(t reflect.Type, field string) error {
	for i := 0; w.dec.More(); i++ {
		if err := w.value(t.Elem(), fmt.Sprintf("%s[%d]", field, i)); err != nil {
			return err
		}
	}
	_, _, err := w.token() // ']'
	return err
}

// scalarMismatch says what a scalar of type t should have been when tok
// does not fit it, or "" when it does.
func scalarMismatch(t reflect.Type, tok json.Token) string {
	switch t.Kind() {
	case reflect.String:
		if _, ok := tok.(string); !ok {
			return "a string"
		}
	case reflect.Bool:
		if _, ok := tok.(bool); !ok {
			return "true or false"
		}
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := tok.(json.Number)
		if !ok {
			return "an integer"
		}
		if _, err := strconv.ParseInt(n.String(), 10, t.Bits()); err != nil {
			return fmt.Sprintf("an integer of at most %d bits", t.Bits())
		}
	case reflect.Uint64, reflect.Uint, reflect.Uint32:
		n, ok := tok.(json.Number)
		if !ok {
			return "an integer >= 0"
		}
		if _, err := strconv.ParseUint(n.String(), 10, t.Bits()); err != nil {
			return fmt.Sprintf("an integer >= 0 of at most %d bits", t.Bits())
		}
	default:
		return t.String()
	}
	return ""
}
