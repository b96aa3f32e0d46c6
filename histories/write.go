package histories

import (
	"io"
	"strconv"
	"unicode/utf8"
)

// Write writes events in the canonical form: one compact JSON object per
// line, fields in the order of [Event] and [Value], absent fields left out,
// each line ended by '\n'. The canonical form of a history is unique, so
// equal histories are equal files and Write(Read(f)) reproduces a canonical f
// byte for byte.
//
// Write does not validate: it writes what it is given, so that even a broken
// history can be saved and looked at. Read it back to validate it.
func Write(w io.Writer, events []Event) error {
	const flushAt = 64 << 10
	buf := make([]byte, 0, flushAt+512)
	fw := &FieldWriter{} // one for every value: an interface's method keeps what it is given
	for i := range events {
		buf = appendEvent(buf, &events[i], fw)
		if len(buf) >= flushAt {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	if len(buf) > 0 {
		if _, err := w.Write(buf); err != nil {
			return err
		}
	}
	return nil
}

// appendEvent appends e's canonical line to buf, writing its value with w.
func appendEvent(buf []byte, e *Event, w *FieldWriter) []byte {
	buf = append(buf, `{"index":`...)
	buf = strconv.AppendInt(buf, int64(e.Index), 10)
	buf = append(buf, `,"time":`...)
	buf = strconv.AppendInt(buf, e.Time, 10)
	buf = append(buf, `,"process":`...)
	buf = appendString(buf, e.Process)
	buf = append(buf, `,"type":`...)
	buf = appendString(buf, string(e.Type))
	buf = append(buf, `,"f":`...)
	buf = appendString(buf, e.F)
	if e.Lock != "" {
		buf = append(buf, `,"lock":`...)
		buf = appendString(buf, e.Lock)
	}
	if e.Kind != "" {
		buf = append(buf, `,"kind":`...)
		buf = appendString(buf, e.Kind)
	}
	if !noValue(e.Value) {
		buf = append(buf, `,"value":`...)
		buf = w.appendValue(buf, e.Value)
	}
	if e.Error != "" {
		buf = append(buf, `,"error":`...)
		buf = appendString(buf, e.Error)
	}
	return append(buf, "}\n"...)
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string, escaped as encoding/json does
// without HTML escaping: quotes, backslashes and control characters, U+2028
// and U+2029 (which break JavaScript), and invalid UTF-8 as U+FFFD.
func appendString(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			switch c {
			case '"', '\\':
				buf = append(buf, '\\', c)
			case '\b':
				buf = append(buf, '\\', 'b')
			case '\f':
				buf = append(buf, '\\', 'f')
			case '\n':
				buf = append(buf, '\\', 'n')
			case '\r':
				buf = append(buf, '\\', 'r')
			case '\t':
				buf = append(buf, '\\', 't')
			default:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf = append(buf, s[start:i]...)
			buf = append(buf, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			buf = append(buf, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}
