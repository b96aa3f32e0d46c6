package amqpwire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// The frame types and the frame-end octet (spec 4.2.3), and the smallest
// frame_max a peer may offer, which also bounds every frame before
// connection.tune settles frame_max.
const (
	FrameMethod    = 1
	FrameHeader    = 2 // a content header
	FrameBody      = 3
	FrameHeartbeat = 8
	FrameEnd       = 0xCE
	FrameMinSize   = 4096
)

// frameOverhead is a frame's bytes around its payload: type, channel, size
// and frame-end.
const frameOverhead = 8

// ProtocolHeader is what a client sends first. A server that gets anything
// else answers with this header and closes the connection: RabbitMQ does
// (refuse_connection), whatever the eight bytes were.
const ProtocolHeader = "AMQP\x00\x00\x09\x01"

// Frame is one frame: its type, its channel and its payload (without the
// frame-end).
type Frame struct {
	Type    byte
	Channel uint16
	Payload []byte
}

// FrameError is a frame the Reader refused, or could not read to its end:
// the frame's type, channel and declared payload size, and what was wrong.
// Err is the read's error when the stream broke inside the frame
// (io.ErrUnexpectedEOF when it ended there).
type FrameError struct {
	Type    byte
	Channel uint16
	Size    uint32
	Problem string
	Err     error
}

func (e *FrameError) Error() string {
	s := fmt.Sprintf("amqpwire: frame of type %d (%s) on channel %d, payload %d bytes: %s",
		e.Type, frameTypeName(e.Type), e.Channel, e.Size, e.Problem)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *FrameError) Unwrap() error { return e.Err }

func frameTypeName(t byte) string {
	switch t {
	case FrameMethod:
		return "method"
	case FrameHeader:
		return "content header"
	case FrameBody:
		return "content body"
	case FrameHeartbeat:
		return "heartbeat"
	}
	return "no frame type"
}

// Reader reads whole frames from a stream, buffered.
type Reader struct {
	r        *bufio.Reader
	frameMax uint32
}

// NewReader reads frames from r, refusing those larger than frameMax (0:
// no limit; FrameMinSize until connection.tune has settled frame_max).
func NewReader(r io.Reader, frameMax uint32) *Reader {
	return &Reader{r: bufio.NewReaderSize(r, 64<<10), frameMax: frameMax}
}

// Buffered reports whether a whole frame other than a heartbeat has been
// read from the stream and not yet returned: one that came with the
// frames returned last, in the same read, which a broker's reader (as
// RabbitMQ's) takes before it looks at anything else.
func (r *Reader) Buffered() bool {
	b, _ := r.r.Peek(r.r.Buffered())
	for len(b) >= 7 {
		end := 7 + uint64(binary.BigEndian.Uint32(b[3:7])) + 1
		switch {
		case uint64(len(b)) < end:
			return false
		case b[0] != FrameHeartbeat:
			return true
		}
		b = b[end:]
	}
	return false
}

// SetFrameMax changes the limit, once connection.tune-ok has settled it.
func (r *Reader) SetFrameMax(frameMax uint32) { r.frameMax = frameMax }

// ReadProtocolHeader reads the eight bytes a client sends first, and
// fails unless they are ProtocolHeader, quoting them. A server then writes
// ProtocolHeader and closes.
func (r *Reader) ReadProtocolHeader() error {
	var h [8]byte
	n, err := io.ReadFull(r.r, h[:])
	if err != nil {
		return fmt.Errorf("amqpwire: protocol header: %q, then %w", h[:n], err)
	}
	if string(h[:]) != ProtocolHeader {
		return fmt.Errorf("amqpwire: protocol header %q, not AMQP 0-9-1's %q", h[:], ProtocolHeader)
	}
	return nil
}

// ReadFrame reads the next frame. Its payload is its own: later reads do
// not change it. io.EOF means the stream ended between frames; a frame
// refused or cut short gives a *FrameError. As RabbitMQ does, a payload
// may exceed frame_max minus the frame's 8 other bytes by up to 8 (so
// many clients get it wrong that RabbitMQ allows it), but not frame_max.
func (r *Reader) ReadFrame() (Frame, error) {
	var h [7]byte
	if n, err := io.ReadFull(r.r, h[:]); err != nil {
		if n == 0 && err == io.EOF {
			return Frame{}, io.EOF
		}
		return Frame{}, fmt.Errorf("amqpwire: frame header of %d bytes: %w", n, noEOF(err))
	}
	f := Frame{Type: h[0], Channel: binary.BigEndian.Uint16(h[1:])}
	size := binary.BigEndian.Uint32(h[3:])
	fail := func(err error, format string, args ...any) (Frame, error) {
		return Frame{}, &FrameError{Type: f.Type, Channel: f.Channel, Size: size,
			Problem: fmt.Sprintf(format, args...), Err: err}
	}
	if r.frameMax != 0 && size > r.frameMax {
		return fail(nil, "over frame_max %d", r.frameMax)
	}
	payload, err := readN(r.r, size)
	if err != nil {
		return fail(noEOF(err), "the stream broke after %d payload bytes", len(payload))
	}
	end, err := r.r.ReadByte()
	if err != nil {
		return fail(noEOF(err), "the stream broke before the frame-end")
	}
	if end != FrameEnd {
		return fail(nil, "frame-end is 0x%02X, not 0xCE", end)
	}
	switch {
	case f.Type != FrameMethod && f.Type != FrameHeader && f.Type != FrameBody && f.Type != FrameHeartbeat:
		return fail(nil, "unknown frame type (method 1, content header 2, body 3, heartbeat 8)")
	case f.Type == FrameHeartbeat && size != 0:
		return fail(nil, "a heartbeat has no payload")
	}
	f.Payload = payload
	return f, nil
}

// noEOF turns an io.EOF inside a frame into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// readN reads n bytes, growing its buffer as they come, so that a size
// field no bytes follow cannot make it allocate much.
func readN(r io.Reader, n uint32) ([]byte, error) {
	const chunk = 64 << 10
	b := make([]byte, 0, min(n, chunk))
	for uint32(len(b)) < n {
		k := min(n-uint32(len(b)), chunk)
		at := len(b)
		b = append(b, make([]byte, k)...)
		if m, err := io.ReadFull(r, b[at:]); err != nil {
			return b[:at+m], err
		}
	}
	return b, nil
}

// AppendFrame appends a whole frame to b: header, payload, frame-end.
func AppendFrame(b []byte, f Frame) []byte {
	b = append(b, f.Type)
	b = binary.BigEndian.AppendUint16(b, f.Channel)
	b = binary.BigEndian.AppendUint32(b, uint32(len(f.Payload)))
	return append(append(b, f.Payload...), FrameEnd)
}

// Writer writes frames to a stream, buffered: nothing goes out before
// Flush.
type Writer struct {
	w        *bufio.Writer
	frameMax uint32
	buf      []byte
}

// NewWriter writes frames to w, splitting content into body frames of at
// most frameMax bytes each (0: no limit).
func NewWriter(w io.Writer, frameMax uint32) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10), frameMax: frameMax}
}

// SetFrameMax changes the size body frames are cut to.
func (w *Writer) SetFrameMax(frameMax uint32) { w.frameMax = frameMax }

// WriteFrame writes one frame.
func (w *Writer) WriteFrame(f Frame) error {
	w.buf = AppendFrame(w.buf[:0], f)
	_, err := w.w.Write(w.buf)
	return err
}

// WriteMethod writes a method frame on channel ch.
func (w *Writer) WriteMethod(ch uint16, m Method) error {
	p, err := AppendMethod(w.buf[:0], m)
	if err != nil {
		return err
	}
	w.buf = p
	return w.writeRaw(FrameMethod, ch, p)
}

// writeRaw writes a frame whose payload may alias w.buf.
func (w *Writer) writeRaw(typ byte, ch uint16, payload []byte) error {
	var h [7]byte
	h[0] = typ
	binary.BigEndian.PutUint16(h[1:], ch)
	binary.BigEndian.PutUint32(h[3:], uint32(len(payload)))
	w.w.Write(h[:])
	w.w.Write(payload)
	return w.w.WriteByte(FrameEnd)
}

// Flush sends what was written.
func (w *Writer) Flush() error { return w.w.Flush() }
