package amqpwire

import (
	"fmt"
	"time"
)

// Header is a content header frame's payload (spec 4.2.6.1): the class of
// the method the content belongs to (60, basic), the body's size, and the
// basic class's properties.
type Header struct {
	Class      uint16
	weight     uint16 // unused, zero; kept so that bytes decoded encode again the same
	BodySize   uint64
	Properties Properties
}

// Properties are the basic class's message properties. Flags holds the
// property flags as they came (bit 15 content-type ... bit 2 cluster-id): a
// property is written when its flag is set or its value is not zero, so a
// decoded header encodes again to the same bytes, and one built by hand
// needs no flags.
type Properties struct {
	Flags           uint16
	ContentType     string
	ContentEncoding string
	Headers         Table
	DeliveryMode    uint8 // 1 transient, 2 persistent
	Priority        uint8
	CorrelationID   string
	ReplyTo         string
	Expiration      string // a per-message TTL in milliseconds, as a decimal string
	MessageID       string
	Timestamp       time.Time
	Type            string
	UserID          string // RabbitMQ refuses a publish whose user-id is not the connection's user
	AppID           string
	ClusterID       string // reserved in 0-9-1; RabbitMQ passes it on
}

// The property flags, one bit per property from bit 15 down. Bit 0 says
// another flags word follows; the basic class never has one.
const (
	flagContentType uint16 = 1 << (15 - iota)
	flagContentEncoding
	flagHeaders
	flagDeliveryMode
	flagPriority
	flagCorrelationID
	flagReplyTo
	flagExpiration
	flagMessageID
	flagTimestamp
	flagType
	flagUserID
	flagAppID
	flagClusterID
	flagContinued uint16 = 1
)

// fields walks the properties the flags name. Encoding, it sets the flag
// of every property whose value is not zero first.
func (p *Properties) fields(c *codec) {
	if c.enc {
		p.Flags |= p.present()
	}
	c.short("property-flags", &p.Flags)
	if c.err == nil && p.Flags&flagContinued != 0 {
		c.fail("property-flags", "0x%04X continues (bit 0) past the basic class's 14 properties", p.Flags)
	}
	str := func(flag uint16, name string, v *string) {
		if p.Flags&flag != 0 {
			c.shortstr(name, v)
		}
	}
	str(flagContentType, "content-type", &p.ContentType)
	str(flagContentEncoding, "content-encoding", &p.ContentEncoding)
	if p.Flags&flagHeaders != 0 {
		c.table("headers", &p.Headers)
	}
	if p.Flags&flagDeliveryMode != 0 {
		c.octet("delivery-mode", &p.DeliveryMode)
	}
	if p.Flags&flagPriority != 0 {
		c.octet("priority", &p.Priority)
	}
	str(flagCorrelationID, "correlation-id", &p.CorrelationID)
	str(flagReplyTo, "reply-to", &p.ReplyTo)
	str(flagExpiration, "expiration", &p.Expiration)
	str(flagMessageID, "message-id", &p.MessageID)
	if p.Flags&flagTimestamp != 0 {
		c.timestamp("timestamp", &p.Timestamp)
	}
	str(flagType, "type", &p.Type)
	str(flagUserID, "user-id", &p.UserID)
	str(flagAppID, "app-id", &p.AppID)
	str(flagClusterID, "cluster-id", &p.ClusterID)
}

// present are the flags of the properties whose values are not zero.
func (p *Properties) present() uint16 {
	var f uint16
	set := func(flag uint16, on bool) {
		if on {
			f |= flag
		}
	}
	set(flagContentType, p.ContentType != "")
	set(flagContentEncoding, p.ContentEncoding != "")
	set(flagHeaders, p.Headers != nil)
	set(flagDeliveryMode, p.DeliveryMode != 0)
	set(flagPriority, p.Priority != 0)
	set(flagCorrelationID, p.CorrelationID != "")
	set(flagReplyTo, p.ReplyTo != "")
	set(flagExpiration, p.Expiration != "")
	set(flagMessageID, p.MessageID != "")
	set(flagTimestamp, !p.Timestamp.IsZero())
	set(flagType, p.Type != "")
	set(flagUserID, p.UserID != "")
	set(flagAppID, p.AppID != "")
	set(flagClusterID, p.ClusterID != "")
	return f
}

func (h *Header) fields(c *codec) {
	c.short("class-id", &h.Class)
	c.short("weight", &h.weight)
	c.longlong("body-size", &h.BodySize)
	h.Properties.fields(c)
}

// AppendHeader appends a content header frame's payload to b.
func AppendHeader(b []byte, h Header) ([]byte, error) {
	c := codec{enc: true, b: b}
	h.fields(&c)
	if c.err != nil {
		return b, fmt.Errorf("amqpwire: content header: %w", c.err)
	}
	return c.b, nil
}

// DecodeHeader decodes a content header frame's payload. Like RabbitMQ it
// refuses a payload too short for its fields or with bytes after them,
// naming the property.
func DecodeHeader(payload []byte) (Header, error) {
	var h Header
	c := codec{b: payload}
	h.fields(&c)
	if c.err == nil && len(c.b) > 0 {
		c.err = fmt.Errorf("%d bytes after the last property", len(c.b))
	}
	if c.err != nil {
		return Header{}, fmt.Errorf("amqpwire: content header: %w", c.err)
	}
	return h, nil
}

// WriteContent writes a method that carries content (basic.publish,
// return, deliver, get-ok), its content header with props and the body's
// size, and the body in frames of at most frame_max bytes each, frame and
// all (none for an empty body), as RabbitMQ and its clients split it.
func (w *Writer) WriteContent(ch uint16, m Method, props Properties, body []byte) error {
	if err := w.WriteMethod(ch, m); err != nil {
		return err
	}
	p, err := AppendHeader(w.buf[:0], Header{Class: IDOf(m).Class(), BodySize: uint64(len(body)), Properties: props})
	if err != nil {
		return err
	}
	w.buf = p
	if err := w.writeRaw(FrameHeader, ch, p); err != nil {
		return err
	}
	chunk := len(body)
	if w.frameMax > frameOverhead {
		chunk = int(w.frameMax - frameOverhead)
	}
	for len(body) > 0 {
		n := min(chunk, len(body))
		if err := w.writeRaw(FrameBody, ch, body[:n]); err != nil {
			return err
		}
		body = body[n:]
	}
	return nil
}
