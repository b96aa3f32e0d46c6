package amqpwire

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// codec walks the fields of a method or of a content header in their order
// on the wire, writing them (enc) or reading them. Each struct's layout is
// declared once, in its fields method, and serves both directions, so that
// encoding and decoding cannot disagree.
//
// Consecutive bits share octets, eight at most to one (spec 4.2.5.2); any
// other field ends the run. The first error stops the walk: later fields
// are left as they are.
type codec struct {
	enc  bool
	b    []byte // enc: the output; dec: the input not read yet
	err  error
	bits int // the index in b (enc) or the value (dec) of the octet holding the pending bits
	nbit uint
}

// fail records the first error, naming the field.
func (c *codec) fail(name, format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("%s: %s", name, fmt.Sprintf(format, args...))
	}
}

// take returns the next n input bytes, or nil after recording that they
// are missing.
func (c *codec) take(name, what string, n int) []byte {
	c.nbit = 0
	if c.err != nil {
		return nil
	}
	if len(c.b) < n {
		c.fail(name, "%s takes %d bytes, %d left", what, n, len(c.b))
		return nil
	}
	v := c.b[:n]
	c.b = c.b[n:]
	return v
}

func (c *codec) octet(name string, v *uint8) {
	if c.enc {
		c.nbit = 0
		c.b = append(c.b, *v)
	} else if p := c.take(name, "an octet", 1); p != nil {
		*v = p[0]
	}
}

func (c *codec) short(name string, v *uint16) {
	if c.enc {
		c.nbit = 0
		c.b = binary.BigEndian.AppendUint16(c.b, *v)
	} else if p := c.take(name, "a short", 2); p != nil {
		*v = binary.BigEndian.Uint16(p)
	}
}

func (c *codec) long(name string, v *uint32) {
	if c.enc {
		c.nbit = 0
		c.b = binary.BigEndian.AppendUint32(c.b, *v)
	} else if p := c.take(name, "a long", 4); p != nil {
		*v = binary.BigEndian.Uint32(p)
	}
}

func (c *codec) longlong(name string, v *uint64) {
	if c.enc {
		c.nbit = 0
		c.b = binary.BigEndian.AppendUint64(c.b, *v)
	} else if p := c.take(name, "a long long", 8); p != nil {
		*v = binary.BigEndian.Uint64(p)
	}
}

// timestamp is a 64-bit count of seconds since the epoch, decoded in UTC.
func (c *codec) timestamp(name string, v *time.Time) {
	u := uint64(v.Unix())
	c.longlong(name, &u)
	if !c.enc && c.err == nil {
		*v = time.Unix(int64(u), 0).UTC()
	}
}

func (c *codec) bit(name string, v *bool) {
	if c.nbit == 0 || c.nbit == 8 {
		if c.enc {
			c.bits = len(c.b)
			c.b = append(c.b, 0)
		} else if p := c.take(name, "an octet of bits", 1); p != nil {
			c.bits = int(p[0])
		}
		c.nbit = 0
	}
	if c.enc {
		c.b[c.bits] |= boolByte(*v) << c.nbit
	} else if c.err == nil {
		*v = c.bits&(1<<c.nbit) != 0
	}
	c.nbit++
}

func (c *codec) shortstr(name string, v *string) {
	if c.enc {
		c.nbit = 0
		if len(*v) > math.MaxUint8 {
			c.fail(name, "short string of %d bytes, over 255", len(*v))
			return
		}
		c.b = append(append(c.b, byte(len(*v))), *v...)
		return
	}
	if p := c.take(name, "a short string's length", 1); p != nil {
		if s := c.take(name, "the short string", int(p[0])); s != nil {
			*v = string(s)
		}
	}
}

// longBytes reads a 4-byte length and as many bytes.
func (c *codec) longBytes(name, what string) []byte {
	p := c.take(name, what+"'s length", 4)
	if p == nil {
		return nil
	}
	n := binary.BigEndian.Uint32(p)
	if uint64(n) > uint64(len(c.b)) {
		c.fail(name, "%s of %d bytes, %d left", what, n, len(c.b))
		return nil
	}
	return c.take(name, what, int(n))
}

func (c *codec) longstr(name string, v *string) {
	if c.enc {
		c.nbit = 0
		var err error
		if c.b, err = appendLongstr(c.b, *v); err != nil {
			c.fail(name, "%v", err)
		}
	} else if s := c.longBytes(name, "the long string"); s != nil {
		*v = string(s)
	}
}

func (c *codec) table(name string, v *Table) {
	if c.enc {
		c.nbit = 0
		var err error
		if c.b, err = appendTable(c.b, *v, 0); err != nil {
			c.fail(name, "%v", err)
		}
		return
	}
	if s := c.longBytes(name, "the table"); s != nil {
		t, err := decodeTable(s, 0)
		if err != nil {
			c.fail(name, "%v", err)
			return
		}
		*v = t
	}
}
