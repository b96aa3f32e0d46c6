package amqpwire

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Table is a field table (spec 4.2.5.5) in the order of the wire. It is a
// list, not a map, so that a table decoded and encoded again gives the same
// bytes (RabbitMQ keeps a table as a list too, and answers with its own
// properties in its own order).
type Table []Field

// Field is one entry of a Table: its name and its value.
//
// A value's Go type says its AMQP type, one for each type RabbitMQ reads
// (rabbit_binary_parser), as RabbitMQ names them in its inequivalent-arg
// errors: bool 't' (bool), int8 'b' (byte), uint8 'B' (unsignedbyte), int16
// 's' (short; the spec's 'U', which RabbitMQ does not use), uint16 'u'
// (unsignedshort), int32 'I' (signedint), uint32 'i' (unsignedint), int64
// 'l' (long; RabbitMQ reads 'L' as a signed long too, and so does
// Decode, which then writes it back as 'l', as RabbitMQ does), float32 'f'
// (float), float64 'd' (double), Decimal 'D' (decimal), string 'S'
// (longstr), []any 'A' (array), time.Time 'T' (timestamp, whole seconds,
// decoded in UTC), Table 'F' (table), nil 'V' (void) and []byte 'x'
// (binary). Any other Go type cannot be encoded.
type Field struct {
	Name  string
	Value any
}

// Decimal is a field value of type 'D': Value / 10^Scale.
type Decimal struct {
	Scale uint8
	Value uint32
}

// Get returns the value of the first field named name, and whether there
// is one.
func (t Table) Get(name string) (any, bool) {
	for _, f := range t {
		if f.Name == name {
			return f.Value, true
		}
	}
	return nil, false
}

// TypeName is the name RabbitMQ gives a field value's type in its
// PRECONDITION_FAILED texts ("received the value '0' of type
// 'signedint'"), or "" for a Go type that is no field type.
func TypeName(v any) string {
	if t, ok := typeOf(v); ok {
		return fieldTypes[t]
	}
	return ""
}

// fieldTypes names each tag Encode writes as RabbitMQ names its type.
var fieldTypes = map[byte]string{
	't': "bool", 'b': "byte", 'B': "unsignedbyte", 's': "short", 'u': "unsignedshort",
	'I': "signedint", 'i': "unsignedint", 'l': "long", 'f': "float", 'd': "double",
	'D': "decimal", 'S': "longstr", 'A': "array", 'T': "timestamp", 'F': "table",
	'V': "void", 'x': "binary",
}

// typeOf is the tag a Go value is written with.
func typeOf(v any) (byte, bool) {
	switch v.(type) {
	case bool:
		return 't', true
	case int8:
		return 'b', true
	case uint8:
		return 'B', true
	case int16:
		return 's', true
	case uint16:
		return 'u', true
	case int32:
		return 'I', true
	case uint32:
		return 'i', true
	case int64:
		return 'l', true
	case float32:
		return 'f', true
	case float64:
		return 'd', true
	case Decimal:
		return 'D', true
	case string:
		return 'S', true
	case []any:
		return 'A', true
	case time.Time:
		return 'T', true
	case Table:
		return 'F', true
	case nil:
		return 'V', true
	case []byte:
		return 'x', true
	}
	return 0, false
}

// maxDepth bounds how deeply tables and arrays nest when decoded, so that a
// hostile frame cannot recurse without end; RabbitMQ's own tables nest two
// deep (capabilities in server-properties).
const maxDepth = 64

// appendTable appends t as a long-string-framed table.
func appendTable(b []byte, t Table, depth int) ([]byte, error) {
	if depth > maxDepth {
		return b, fmt.Errorf("tables nest over %d deep", maxDepth)
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	for _, f := range t {
		if len(f.Name) > math.MaxUint8 {
			return b, fmt.Errorf("field name of %d bytes, over 255", len(f.Name))
		}
		b = append(b, byte(len(f.Name)))
		b = append(b, f.Name...)
		var err error
		if b, err = appendValue(b, f.Value, depth); err != nil {
			return b, fmt.Errorf("field %q: %w", f.Name, err)
		}
	}
	return patchLength(b, at)
}

// patchLength writes the length of what follows b[at:at+4] there.
func patchLength(b []byte, at int) ([]byte, error) {
	n := len(b) - at - 4
	if uint64(n) > math.MaxUint32 {
		return b, fmt.Errorf("%d bytes, over a long string's 4 GiB", n)
	}
	binary.BigEndian.PutUint32(b[at:], uint32(n))
	return b, nil
}

// appendValue appends one tagged field value.
func appendValue(b []byte, v any, depth int) ([]byte, error) {
	t, ok := typeOf(v)
	if !ok {
		return b, fmt.Errorf("Go type %T is no AMQP field type", v)
	}
	b = append(b, t)
	switch v := v.(type) {
	case bool:
		return append(b, boolByte(v)), nil
	case int8:
		return append(b, byte(v)), nil
	case uint8:
		return append(b, v), nil
	case int16:
		return binary.BigEndian.AppendUint16(b, uint16(v)), nil
	case uint16:
		return binary.BigEndian.AppendUint16(b, v), nil
	case int32:
		return binary.BigEndian.AppendUint32(b, uint32(v)), nil
	case uint32:
		return binary.BigEndian.AppendUint32(b, v), nil
	case int64:
		return binary.BigEndian.AppendUint64(b, uint64(v)), nil
	case float32:
		return binary.BigEndian.AppendUint32(b, math.Float32bits(v)), nil
	case float64:
		return binary.BigEndian.AppendUint64(b, math.Float64bits(v)), nil
	case Decimal:
		return binary.BigEndian.AppendUint32(append(b, v.Scale), v.Value), nil
	case time.Time:
		return binary.BigEndian.AppendUint64(b, uint64(v.Unix())), nil
	case nil:
		return b, nil
	}
	return appendLong(b, v, depth)
}

// appendLong appends the values framed by a 4-byte length: strings,
// binaries, arrays and tables.
func appendLong(b []byte, v any, depth int) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return appendLongstr(b, v)
	case []byte:
		return appendLongstr(b, string(v))
	case Table:
		return appendTable(b, v, depth+1)
	}
	if depth+1 > maxDepth {
		return b, fmt.Errorf("tables nest over %d deep", maxDepth)
	}
	at := len(b)
	b = append(b, 0, 0, 0, 0)
	for i, e := range v.([]any) {
		var err error
		if b, err = appendValue(b, e, depth+1); err != nil {
			return b, fmt.Errorf("array element %d: %w", i, err)
		}
	}
	return patchLength(b, at)
}

func appendLongstr(b []byte, s string) ([]byte, error) {
	if uint64(len(s)) > math.MaxUint32 {
		return b, fmt.Errorf("long string of %d bytes, over 4 GiB", len(s))
	}
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...), nil
}

func boolByte(v bool) byte {
	if v {
		return 1
	}
	return 0
}

// DecodeFields reads the entries of a table given without its length: the
// response of connection.start-ok under AMQPLAIN is one.
func DecodeFields(b []byte) (Table, error) { return decodeTable(b, 0) }

// decodeTable reads the entries of a table whose bytes (without the length)
// are b.
func decodeTable(b []byte, depth int) (Table, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("tables nest over %d deep", maxDepth)
	}
	var t Table // an empty table decodes as nil, as it encodes
	for len(b) > 0 {
		n := int(b[0])
		if len(b) < 1+n {
			return nil, fmt.Errorf("field name of %d bytes, %d left in the table", n, len(b)-1)
		}
		name := string(b[1 : 1+n])
		v, rest, err := decodeValue(b[1+n:], depth)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", name, err)
		}
		t = append(t, Field{Name: name, Value: v})
		b = rest
	}
	return t, nil
}

// fixedSizes are the sizes of the values of fixed size after their tag.
var fixedSizes = [256]int8{
	't': 1, 'b': 1, 'B': 1, 's': 2, 'u': 2, 'I': 4, 'i': 4, 'l': 8, 'L': 8,
	'f': 4, 'd': 8, 'D': 5, 'T': 8, 'V': 0,
	'S': -1, 'A': -1, 'F': -1, 'x': -1,
}

// known says which tags are field types (fixedSizes is 0 for both 'V' and
// an unknown tag).
func known(t byte) bool {
	switch t {
	case 't', 'b', 'B', 's', 'u', 'I', 'i', 'l', 'L', 'f', 'd', 'D', 'T', 'V', 'S', 'A', 'F', 'x':
		return true
	}
	return false
}

// decodeValue reads one tagged value from the front of b.
func decodeValue(b []byte, depth int) (any, []byte, error) {
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("no type tag: the table ends")
	}
	t := b[0]
	b = b[1:]
	if !known(t) {
		return nil, nil, fmt.Errorf("unknown field type %q (0x%02x)", t, t)
	}
	n := int(fixedSizes[t])
	if n < 0 {
		return decodeLong(t, b, depth)
	}
	if len(b) < n {
		return nil, nil, fmt.Errorf("field type %q takes %d bytes, %d left", t, n, len(b))
	}
	return fixedValue(t, b[:n]), b[n:], nil
}

// fixedValue is the value of a fixed-size field of type t held in v.
func fixedValue(t byte, v []byte) any {
	be := binary.BigEndian
	switch t {
	case 't':
		return v[0] != 0
	case 'b':
		return int8(v[0])
	case 'B':
		return v[0]
	case 's':
		return int16(be.Uint16(v))
	case 'u':
		return be.Uint16(v)
	case 'I':
		return int32(be.Uint32(v))
	case 'i':
		return be.Uint32(v)
	case 'l', 'L':
		return int64(be.Uint64(v))
	case 'f':
		return math.Float32frombits(be.Uint32(v))
	case 'd':
		return math.Float64frombits(be.Uint64(v))
	case 'D':
		return Decimal{Scale: v[0], Value: be.Uint32(v[1:])}
	case 'T':
		return time.Unix(int64(be.Uint64(v)), 0).UTC()
	}
	return nil // 'V'
}

// decodeLong reads a value framed by a 4-byte length: 'S', 'x', 'A', 'F'.
func decodeLong(t byte, b []byte, depth int) (any, []byte, error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("field type %q: its length takes 4 bytes, %d left", t, len(b))
	}
	n := binary.BigEndian.Uint32(b)
	b = b[4:]
	if uint64(n) > uint64(len(b)) {
		return nil, nil, fmt.Errorf("field type %q of %d bytes, %d left", t, n, len(b))
	}
	v, rest := b[:n], b[n:]
	switch t {
	case 'S':
		return string(v), rest, nil
	case 'x':
		if n == 0 {
			return []byte(nil), rest, nil
		}
		return append([]byte{}, v...), rest, nil
	case 'F':
		tab, err := decodeTable(v, depth+1)
		return tab, rest, err
	}
	if depth+1 > maxDepth {
		return nil, nil, fmt.Errorf("arrays nest over %d deep", maxDepth)
	}
	var arr []any
	for len(v) > 0 {
		e, more, err := decodeValue(v, depth+1)
		if err != nil {
			return nil, nil, fmt.Errorf("array element %d: %w", len(arr), err)
		}
		arr = append(arr, e)
		v = more
	}
	return arr, rest, nil
}

// Capabilities are the capabilities RabbitMQ 3.10.8 names in
// connection.start's server properties, in its order, each true.
func Capabilities() Table {
	var caps Table
	for _, c := range []string{"publisher_confirms", "exchange_exchange_bindings", "basic.nack",
		"consumer_cancel_notify", "connection.blocked", "consumer_priorities",
		"authentication_failure_close", "per_consumer_qos", "direct_reply_to"} {
		caps = append(caps, Field{Name: c, Value: true})
	}
	return caps
}
