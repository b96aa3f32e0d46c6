package amqpproxy

import (
	"encoding/binary"
	"errors"

	"github.com/lockprover/lockprover/internal/amqpwire"
)

// AMQP 0-9-1 framing (spec section 4.2.3): type, channel, size, payload,
// frame-end.
const (
	frameMethod    = amqpwire.FrameMethod
	frameHeader    = amqpwire.FrameHeader
	frameBody      = amqpwire.FrameBody
	frameHeartbeat = amqpwire.FrameHeartbeat
	frameEnd       = amqpwire.FrameEnd

	frameHeaderSize = 7
	// maxFrameSize bounds the size field. Brokers negotiate frame_max far
	// below it (RabbitMQ's default is 128 KiB); a larger size means the
	// stream is not AMQP or has lost its framing.
	maxFrameSize = 128 << 20
	// inspectMax is how much of a method frame's payload is looked at
	// before the frame is forwarded. It covers every fixed field the
	// tracker reads (ids, up to three short strings, the bit octet, a
	// delivery tag); argument tables after them are not needed.
	inspectMax = 1024
)

var (
	errFrameEnd       = errors.New("proxy: frame does not end with 0xCE")
	errFrameSize      = errors.New("proxy: frame size over 128 MiB")
	errMethodSize     = errors.New("proxy: method frame shorter than its class and method ids")
	errProtocolHeader = errors.New(`proxy: stream does not start with the protocol header "AMQP"`)
)

// frame is what the parser shows of one frame when it is decided: its
// header and, for a method frame, the start of its payload.
type frame struct {
	typ     byte
	channel uint16
	size    uint32
	payload []byte // method frames: the first min(size, inspectMax) payload bytes (aliases the input)
}

// parser splits one direction of an AMQP connection into frames,
// incrementally: input may end anywhere, inside a frame header, a payload or
// before a frame-end.
//
// A frame is decided (shown to visit) once its header and, for a method
// frame, the inspected part of its payload are present; the caller may then
// forward its bytes as they come. Until then scan stops at the frame's first
// byte and the caller presents those bytes again with more appended, so only
// a few undecided bytes are ever carried over.
type parser struct {
	wantHeader bool   // the stream must start with a protocol header (client to broker)
	started    bool   // the protocol header, if any, has been passed
	inFrame    bool   // inside a decided frame: skip payload bytes, then check frame-end
	skip       uint32 // payload bytes of the decided frame still to pass
}

// scan consumes b, calling visit with each frame's offset in b as it is
// decided. It returns how many bytes of b it consumed: all of them, except
// an undecided frame at the end (present it again, with more bytes), or the
// frame at which visit returned false (stopped). A framing error stops the
// scan; the stream cannot be resynchronised.
func (p *parser) scan(b []byte, visit func(off int, f frame) bool) (n int, stopped bool, err error) {
	i := 0
	for {
		if p.inFrame {
			if p.skip > 0 {
				k := uint32(min(uint64(p.skip), uint64(len(b)-i)))
				i += int(k)
				p.skip -= k
				if p.skip > 0 {
					return i, false, nil
				}
			}
			if i == len(b) {
				return i, false, nil
			}
			if b[i] != frameEnd {
				return i, false, errFrameEnd
			}
			i++
			p.inFrame = false
		}
		if i == len(b) {
			return i, false, nil
		}
		if !p.started {
			// A broker answers a protocol header it does not support
			// with its own header; 'A' is not a frame type.
			if p.wantHeader || b[i] == 'A' {
				if len(b)-i < 8 {
					return i, false, nil
				}
				if string(b[i:i+4]) != "AMQP" {
					return i, false, errProtocolHeader
				}
				i += 8
			}
			p.started = true
			continue
		}
		if len(b)-i < frameHeaderSize {
			return i, false, nil
		}
		f := frame{
			typ:     b[i],
			channel: binary.BigEndian.Uint16(b[i+1:]),
			size:    binary.BigEndian.Uint32(b[i+3:]),
		}
		if f.size > maxFrameSize {
			return i, false, errFrameSize
		}
		if f.typ == frameMethod {
			if f.size < 4 {
				return i, false, errMethodSize
			}
			want := int(min(f.size, inspectMax))
			if len(b)-i-frameHeaderSize < want {
				return i, false, nil
			}
			f.payload = b[i+frameHeaderSize : i+frameHeaderSize+want]
		}
		if !visit(i, f) {
			return i, true, nil
		}
		i += frameHeaderSize
		p.inFrame, p.skip = true, f.size
	}
}
