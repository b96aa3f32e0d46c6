package amqpwire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestMethodTable holds the table to the spec: every id and name once,
// every reply in the table, each struct named after its method, content
// and no-wait bits where the spec has them.
func TestMethodTable(t *testing.T) {
	if len(methods) != 64 || len(byID) != 64 || len(byType) != 64 {
		t.Fatalf("%d methods, %d ids, %d structs: want 64 of each", len(methods), len(byID), len(byType))
	}
	names := map[string]bool{}
	var content, noWait []string
	for _, m := range Methods() {
		if names[m.Name] {
			t.Errorf("%s twice", m.Name)
		}
		names[m.Name] = true
		for _, r := range m.Replies {
			if _, ok := Lookup(r); !ok || !m.Sync {
				t.Errorf("%s: reply %v is not in the table, or %s is not synchronous", m.Name, r, m.Name)
			}
		}
		if got, want := reflect.TypeOf(m.new()).Elem().Name(), structName(m.Name); got != want {
			t.Errorf("%s is %s, want %s", m.Name, got, want)
		}
		if IDOf(m.new()) != m.ID || m.ID.String() != m.Name {
			t.Errorf("%s: IDOf %v, String %q", m.Name, IDOf(m.new()), m.ID.String())
		}
		if !m.FromClient && !m.FromServer {
			t.Errorf("%s: sent by no one", m.Name)
		}
		if m.Content {
			content = append(content, m.Name)
		}
		if m.NoWait {
			noWait = append(noWait, m.Name)
		}
	}
	if got := strings.Join(content, " "); got != "basic.publish basic.return basic.deliver basic.get-ok" {
		t.Errorf("content: %s", got)
	}
	want := "exchange.declare exchange.delete exchange.bind exchange.unbind queue.declare queue.bind queue.purge queue.delete basic.consume basic.cancel confirm.select"
	if got := strings.Join(noWait, " "); got != want {
		t.Errorf("no-wait: %s", got)
	}
	if got := ID(7, 8).String(); got != "class.method(7,8)" {
		t.Errorf("7,8 is %q", got)
	}
	if IDOf(nil) != 0 {
		t.Errorf("IDOf(nil) = %v", IDOf(nil))
	}
}

// structName is the Go name of a method's struct: "queue.declare-ok" is
// QueueDeclareOK.
func structName(name string) string {
	var b strings.Builder
	for _, w := range strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == '-' }) {
		if w == "ok" {
			b.WriteString("OK")
			continue
		}
		b.WriteString(strings.ToUpper(w[:1]) + w[1:])
	}
	return b.String()
}

// fill sets every exported field of the struct v points to a value that
// is not zero and depends on seed, so that a field written or read in the
// wrong place shows.
func fill(v reflect.Value, seed int) {
	v = v.Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		n := seed*31 + i + 1
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool((seed+i)%2 == 0)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(n) * 0x0101010101)
		case reflect.String:
			f.SetString(strings.Repeat(string(rune('a'+i)), n%40+1))
		case reflect.Slice:
			f.Set(reflect.ValueOf(Table{{"k" + string(rune('a'+i)), int32(n)}, {"s", "v"}}))
		}
	}
}

// TestMethodRoundTrips encodes every method, zero and filled with two
// different seeds (so that each bit is seen both ways), decodes it, and
// encodes it again: the same struct, the same bytes.
func TestMethodRoundTrips(t *testing.T) {
	for _, m := range Methods() {
		for seed := range 3 {
			v := m.new()
			if seed > 0 {
				fill(reflect.ValueOf(v), seed)
			}
			b, err := AppendMethod(nil, v)
			if err != nil {
				t.Fatalf("%s: %v", m.Name, err)
			}
			if got := MethodID(binary.BigEndian.Uint32(b)); got != m.ID {
				t.Errorf("%s encodes as %v", m.Name, got)
			}
			d, err := DecodeMethod(b)
			if err != nil {
				t.Fatalf("%s: %v (% x)", m.Name, err, b)
			}
			if !reflect.DeepEqual(d, v) {
				t.Errorf("%s, seed %d: decoded %+v, want %+v", m.Name, seed, d, v)
			}
			if again, _ := AppendMethod(nil, d); !bytes.Equal(again, b) {
				t.Errorf("%s: encodes again as % x, first % x", m.Name, again, b)
			}
		}
	}
}

// bytesOf builds a payload from its parts: []byte as is, uint16 and
// uint32 and uint64 big-endian, string as a short string.
func bytesOf(parts ...any) []byte {
	var b []byte
	for _, p := range parts {
		switch p := p.(type) {
		case []byte:
			b = append(b, p...)
		case byte:
			b = append(b, p)
		case uint16:
			b = binary.BigEndian.AppendUint16(b, p)
		case uint32:
			b = binary.BigEndian.AppendUint32(b, p)
		case uint64:
			b = binary.BigEndian.AppendUint64(b, p)
		case string:
			b = append(append(b, byte(len(p))), p...)
		}
	}
	return b
}

// TestMethodLayouts checks methods against bytes written by hand from the
// spec, so that a layout wrong both ways still fails.
func TestMethodLayouts(t *testing.T) {
	cases := []struct {
		m    Method
		want []byte
	}{
		{&QueueDeclare{Queue: "q", Durable: true, NoWait: true, Arguments: Table{{"x-max-length", int32(0)}}},
			bytesOf(uint32(50<<16|10), uint16(0), "q", byte(1<<1|1<<4), uint32(18), "x-max-length", byte('I'), uint32(0))},
		{&BasicPublish{Exchange: "", RoutingKey: "rk", Mandatory: true},
			bytesOf(uint32(60<<16|40), uint16(0), "", "rk", byte(1))},
		{&ConnectionTune{ChannelMax: 2047, FrameMax: 131072, Heartbeat: 60},
			bytesOf(uint32(10<<16|30), uint16(2047), uint32(131072), uint16(60))},
		{&BasicNack{DeliveryTag: 7, Multiple: true, Requeue: true},
			bytesOf(uint32(60<<16|120), uint64(7), byte(3))},
		{&ChannelClose{ReplyCode: 404, ReplyText: "NOT_FOUND", ClassID: 50, MethodID: 10},
			bytesOf(uint32(20<<16|40), uint16(404), "NOT_FOUND", uint16(50), uint16(10))},
		{&BasicDeliver{ConsumerTag: "c", DeliveryTag: 1, Redelivered: true, Exchange: "e", RoutingKey: "r"},
			bytesOf(uint32(60<<16|60), "c", uint64(1), byte(1), "e", "r")},
		{&ExchangeUnbindOK{}, bytesOf(uint32(40<<16 | 51))},
		{&ConfirmSelect{NoWait: true}, bytesOf(uint32(85<<16|10), byte(1))},
	}
	for _, c := range cases {
		got, err := AppendMethod(nil, c.m)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("%v: % x, %v; want % x", IDOf(c.m), got, err, c.want)
		}
	}
}

// TestMethodErrors: what DecodeMethod and AppendMethod refuse, and that
// they say what and where.
func TestMethodErrors(t *testing.T) {
	decode := []struct {
		payload []byte
		want    string
	}{
		{[]byte{0, 50}, "method frame of 2 bytes"},
		{bytesOf(uint32(60<<16 | 99)), "class 60, method 99: not a method"},
		{bytesOf(uint32(50<<16|10), uint16(0), []byte{200, 'q'}), "queue.declare: queue: the short string takes 200 bytes, 1 left"},
		{bytesOf(uint32(50<<16|10), uint16(0), "q"), "queue.declare: passive: an octet of bits takes 1 bytes, 0 left"},
		{bytesOf(uint32(60<<16|80), uint64(1), byte(0), byte(9)), "basic.ack: 1 bytes after the last field"},
		{bytesOf(uint32(50<<16|10), uint16(0), "q", byte(0), uint32(3), []byte{1, 'k', 'Z'}), `arguments: field "k": unknown field type 'Z'`},
		{bytesOf(uint32(50<<16|10), uint16(0), "q", byte(0), uint32(9)), "arguments: the table of 9 bytes, 0 left"},
	}
	for _, c := range decode {
		_, err := DecodeMethod(c.payload)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeMethod(% x) = %v, want %q", c.payload, err, c.want)
		}
	}
	if _, err := DecodeMethod(bytesOf(uint32(1))); !errors.Is(err, ErrUnknownMethod) {
		t.Errorf("unknown method: %v does not wrap ErrUnknownMethod", err)
	}
	encode := []struct {
		m    Method
		want string
	}{
		{&QueueDeclare{Queue: strings.Repeat("q", 256)}, "queue.declare: queue: short string of 256 bytes, over 255"},
		{&QueueDeclare{Arguments: Table{{"x", 1}}}, `queue.declare: arguments: field "x": Go type int is no AMQP field type`},
		{&BasicConsume{Arguments: Table{{strings.Repeat("k", 300), true}}}, "field name of 300 bytes"},
	}
	for _, c := range encode {
		_, err := AppendMethod(nil, c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AppendMethod(%v) = %v, want %q", IDOf(c.m), err, c.want)
		}
	}
}

// TestNoWaitSet reads the bit from arguments cut anywhere, as the proxy
// sees them.
func TestNoWaitSet(t *testing.T) {
	info := func(name string) MethodInfo {
		for _, m := range methods {
			if m.Name == name {
				return m
			}
		}
		t.Fatalf("no %s", name)
		return MethodInfo{}
	}
	cases := []struct {
		name string
		args []byte
		want bool
	}{
		{"queue.declare", bytesOf(uint16(0), "q", byte(1<<4)), true},
		{"queue.declare", bytesOf(uint16(0), "q", byte(1<<4), uint32(0)), true},
		{"queue.declare", bytesOf(uint16(0), "q", byte(0x0F), uint32(0)), false},
		{"queue.declare", bytesOf(uint16(0), []byte{200}), false},
		{"queue.declare", bytesOf(uint16(0), "a long name"), false},
		{"basic.cancel", bytesOf("tag", byte(1)), true},
		{"confirm.select", nil, false},
		{"confirm.select", []byte{1}, true},
		{"basic.get", bytesOf(uint16(0), "q", byte(0xFF)), false},
		{"exchange.delete", bytesOf(uint16(0), "x", byte(2)), true},
	}
	for _, c := range cases {
		if got := info(c.name).NoWaitSet(c.args); got != c.want {
			t.Errorf("NoWaitSet(%s, % x) = %v, want %v", c.name, c.args, got, c.want)
		}
	}
}

// TestFieldValues: every field type RabbitMQ reads, decoded to its Go type
// and encoded again; 'L' is read as a signed long and written as 'l', as
// RabbitMQ does.
func TestFieldValues(t *testing.T) {
	ts := time.Unix(1700000000, 0).UTC()
	tab := Table{
		{"t", true}, {"b", int8(-2)}, {"B", uint8(250)}, {"s", int16(-300)}, {"u", uint16(60000)},
		{"I", int32(-70000)}, {"i", uint32(4000000000)}, {"l", int64(-1 << 40)}, {"f", float32(1.5)},
		{"d", float64(-2.25)}, {"D", Decimal{Scale: 2, Value: 12345}}, {"S", "long string"},
		{"A", []any{int32(1), "two", nil, []any{true}}}, {"T", ts}, {"F", Table{{"nested", "yes"}}},
		{"V", nil}, {"x", []byte{0, 1, 2}}, {"empty", Table(nil)}, {"noarr", []any(nil)},
	}
	b, err := appendTable(nil, tab, 0)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeTable(b[4:], 0)
	if err != nil || !reflect.DeepEqual(got, tab) {
		t.Fatalf("decoded %#v, %v; want %#v", got, err, tab)
	}
	for _, f := range tab {
		want := f.Name
		if f.Name == "empty" {
			want = "F"
		} else if f.Name == "noarr" {
			want = "A"
		}
		if TypeName(f.Value) != fieldTypes[want[0]] {
			t.Errorf("TypeName(%T) = %q", f.Value, TypeName(f.Value))
		}
	}
	long := bytesOf(byte(1), byte('n'), byte('L'), uint64(1<<63+5))
	got, err = decodeTable(long, 0)
	if err != nil || !reflect.DeepEqual(got, Table{{"n", int64(-1<<63 + 5)}}) {
		t.Fatalf("'L': %#v, %v", got, err)
	}
	if again, _ := appendTable(nil, got, 0); again[4+2] != 'l' {
		t.Errorf("'L' is written back as %q", again[4+2])
	}
	if v, ok := got.Get("n"); !ok || v != int64(-1<<63+5) {
		t.Errorf("Get: %v, %v", v, ok)
	}
	if TypeName(3) != "" {
		t.Errorf("TypeName(int) = %q", TypeName(3))
	}
}

// TestNesting: tables nested past maxDepth are refused both ways, not
// recursed into without end.
func TestNesting(t *testing.T) {
	var v any = "bottom"
	for range maxDepth + 2 {
		v = []any{v}
	}
	if _, err := appendTable(nil, Table{{"deep", v}}, 0); err == nil || !strings.Contains(err.Error(), "nest") {
		t.Errorf("encoding: %v", err)
	}
	b := []byte{}
	for range maxDepth + 2 {
		b = append(bytesOf(byte('A'), uint32(len(b))), b...)
	}
	if _, _, err := decodeValue(b, 0); err == nil || !strings.Contains(err.Error(), "nest") {
		t.Errorf("decoding: %v", err)
	}
}
