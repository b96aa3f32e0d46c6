package mariadb

import (
	"bufio"
	"encoding/binary"
	"errors"
	"io"
	"slices"
)

// The MySQL client/server protocol, as far as the proxy reads it
// (https://mariadb.com/kb/en/clientserver-protocol/,
// https://dev.mysql.com/doc/dev/mysql-server/latest/PAGE_PROTOCOL.html).
//
// Every packet has a 4-byte header: a 3-byte little-endian payload length
// and a 1-byte sequence id. A payload of 0xFFFFFF bytes or more is split
// into frames of 0xFFFFFF bytes followed by a shorter one (possibly empty);
// the proxy reads such a logical packet whole. Each command the client
// sends starts a new sequence at 0, and the server's reply continues it, so
// a command the proxy sends of its own (Skew's SET) is an exchange of its
// own and needs no renumbering of the client's.

const (
	maxFrame = 0xFFFFFF
	// maxPacket bounds a logical packet (the server's max_allowed_packet
	// cannot exceed 1 GiB).
	maxPacket = 1 << 30
)

// Commands (the first byte of a command-phase packet from the client).
const (
	comQuit             = 0x01
	comInitDB           = 0x02
	comQuery            = 0x03
	comFieldList        = 0x04
	comCreateDB         = 0x05
	comDropDB           = 0x06
	comRefresh          = 0x07
	comShutdown         = 0x08
	comStatistics       = 0x09
	comProcessInfo      = 0x0A
	comProcessKill      = 0x0C
	comDebug            = 0x0D
	comPing             = 0x0E
	comChangeUser       = 0x11
	comBinlogDump       = 0x12
	comRegisterSlave    = 0x15
	comStmtPrepare      = 0x16
	comStmtExecute      = 0x17
	comStmtSendLongData = 0x18
	comStmtClose        = 0x19
	comStmtReset        = 0x1A
	comSetOption        = 0x1B
	comStmtFetch        = 0x1C
	comBinlogDumpGTID   = 0x1E
	comResetConnection  = 0x1F
	comStmtBulkExecute  = 0xFA // MariaDB
)

var commandNames = map[byte]string{
	comQuit: "COM_QUIT", comInitDB: "COM_INIT_DB", comQuery: "COM_QUERY", comFieldList: "COM_FIELD_LIST",
	comCreateDB: "COM_CREATE_DB", comDropDB: "COM_DROP_DB", comRefresh: "COM_REFRESH", comShutdown: "COM_SHUTDOWN",
	comStatistics: "COM_STATISTICS", comProcessInfo: "COM_PROCESS_INFO", comProcessKill: "COM_PROCESS_KILL",
	comDebug: "COM_DEBUG", comPing: "COM_PING", comChangeUser: "COM_CHANGE_USER", comBinlogDump: "COM_BINLOG_DUMP",
	comRegisterSlave: "COM_REGISTER_SLAVE", comStmtPrepare: "COM_STMT_PREPARE", comStmtExecute: "COM_STMT_EXECUTE",
	comStmtSendLongData: "COM_STMT_SEND_LONG_DATA", comStmtClose: "COM_STMT_CLOSE", comStmtReset: "COM_STMT_RESET",
	comSetOption: "COM_SET_OPTION", comStmtFetch: "COM_STMT_FETCH", comBinlogDumpGTID: "COM_BINLOG_DUMP_GTID",
	comResetConnection: "COM_RESET_CONNECTION", comStmtBulkExecute: "COM_STMT_BULK_EXECUTE",
}

// commandName is the protocol's name of a command byte, or COM_0xNN.
func commandName(c byte) string {
	if n, ok := commandNames[c]; ok {
		return n
	}
	const hex = "0123456789ABCDEF"
	return "COM_0x" + string([]byte{hex[c>>4], hex[c&15]})
}

// Capability flags the proxy looks at or takes out of the server's greeting.
const (
	capClientMySQL       = 1 << 0 // unset by MariaDB servers: the extended capabilities follow
	capCompress          = 1 << 5
	capProtocol41        = 1 << 9
	capSSL               = 1 << 11
	capDeprecateEOF      = 1 << 24
	capOptionalMetadata  = 1 << 25 // MySQL 8
	capZstd              = 1 << 26 // MySQL 8
	capQueryAttributes   = 1 << 27 // MySQL 8: COM_QUERY carries parameters first
	capProgressObsolete  = 1 << 29 // MariaDB
	unreadableCaps       = capCompress | capSSL | capOptionalMetadata | capZstd | capQueryAttributes | capProgressObsolete
	extExtendedMetadata  = 1 << 3 // MariaDB: extra type names in column definitions; harmless
	readableExtendedCaps = extExtendedMetadata
)

// Server status flags, in OK and EOF packets.
const (
	statusMoreResults  = 0x0008
	statusCursorExists = 0x0040
)

// Packet headers.
const (
	iOK     = 0x00
	iInfile = 0xFB
	iEOF    = 0xFE
	iERR    = 0xFF
)

var errPacketSize = errors.New("mysql proxy: packet over 1 GiB")

// packet is one logical packet as read: raw holds its frames, headers
// included, to be forwarded as they are; payload is the frames' payloads
// joined.
type packet struct {
	raw     []byte
	payload []byte
	seq     byte // the sequence id of its first frame
}

// readPacket reads one logical packet.
func readPacket(r *bufio.Reader) (packet, error) {
	var p packet
	for first := true; ; first = false {
		var h [4]byte
		if _, err := io.ReadFull(r, h[:]); err != nil {
			if !first && err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return p, err
		}
		n := int(h[0]) | int(h[1])<<8 | int(h[2])<<16
		if len(p.raw)+n > maxPacket {
			return p, errPacketSize
		}
		start := len(p.raw)
		p.raw = slices.Grow(p.raw, 4+n)[:start+4+n]
		copy(p.raw[start:], h[:])
		if _, err := io.ReadFull(r, p.raw[start+4:]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return p, err
		}
		if first {
			p.seq = h[3]
			p.payload = p.raw[4:]
		} else {
			if start == 4+maxFrame { // the second frame: copy out of raw
				p.payload = append([]byte(nil), p.raw[4:start]...)
			}
			p.payload = append(p.payload, p.raw[start+4:]...)
		}
		if n < maxFrame {
			return p, nil
		}
	}
}

// commandPacket is a one-frame command packet (sequence id 0) with the
// given command byte and argument.
func commandPacket(cmd byte, arg string) []byte {
	n := 1 + len(arg)
	b := make([]byte, 4, 4+n)
	b[0], b[1], b[2] = byte(n), byte(n>>8), byte(n>>16)
	b = append(b, cmd)
	return append(b, arg...)
}

// lenenc reads a length-encoded integer at the start of b; ok is false if
// b is too short or starts with a byte that is no length.
func lenenc(b []byte) (v uint64, size int, ok bool) {
	if len(b) == 0 {
		return 0, 0, false
	}
	switch c := b[0]; {
	case c < 0xFB:
		return uint64(c), 1, true
	case c == 0xFC && len(b) >= 3:
		return uint64(binary.LittleEndian.Uint16(b[1:])), 3, true
	case c == 0xFD && len(b) >= 4:
		return uint64(b[1]) | uint64(b[2])<<8 | uint64(b[3])<<16, 4, true
	case c == 0xFE && len(b) >= 9:
		return binary.LittleEndian.Uint64(b[1:]), 9, true
	}
	return 0, 0, false
}

// okStatus is the status flags of an OK packet (header 0x00, or 0xFE when
// it ends a result set under CLIENT_DEPRECATE_EOF): after the header, the
// affected rows and the last insert id (length-encoded), then 2 bytes.
func okStatus(p []byte) (uint16, bool) {
	pos := 1
	for range 2 {
		_, n, ok := lenenc(p[pos:])
		if !ok {
			return 0, false
		}
		pos += n
	}
	if len(p) < pos+2 {
		return 0, false
	}
	return binary.LittleEndian.Uint16(p[pos:]), true
}

// eofStatus is the status flags of an EOF packet: 0xFE, warnings (2),
// status (2).
func eofStatus(p []byte) (uint16, bool) {
	if len(p) < 5 {
		return 0, false
	}
	return binary.LittleEndian.Uint16(p[3:]), true
}

// greeting is what the proxy reads in, and changes of, the server's
// initial handshake packet.
type greeting struct {
	connID uint32
}

var errGreeting = errors.New("mysql proxy: the server's greeting is not protocol 10")

// rewriteGreeting reads the connection id from the server's initial
// handshake (protocol 10: version byte, server version up to a NUL,
// connection id, 8 bytes of scramble, a filler, the low capability bytes,
// then charset, status, the high capability bytes, the scramble's length,
// 6 reserved bytes and MariaDB's extended capabilities) and takes out of
// the capabilities it offers those that would make the stream unreadable
// to the proxy: TLS, compression, MySQL 8's query attributes and optional
// metadata, MariaDB's progress reports, metadata cache and bulk commands.
// A client then does not ask for them; go-sql-driver with tls=preferred
// falls back to plain text, and with tls=true fails with "TLS requested
// but server does not support TLS". The scramble, which authentication
// hashes, is left alone. raw is the packet, frames and all (one frame).
func rewriteGreeting(raw []byte) (greeting, error) {
	p := raw[4:]
	if len(p) < 1 || p[0] != 10 {
		return greeting{}, errGreeting
	}
	nul := -1
	for i := 1; i < len(p); i++ {
		if p[i] == 0 {
			nul = i
			break
		}
	}
	low := nul + 1 + 4 + 8 + 1
	if nul < 0 || len(p) < low+2 {
		return greeting{}, errGreeting
	}
	g := greeting{connID: binary.LittleEndian.Uint32(p[nul+1:])}
	caps := uint32(binary.LittleEndian.Uint16(p[low:]))
	high := low + 2 + 3
	if len(p) >= high+2 {
		caps |= uint32(binary.LittleEndian.Uint16(p[high:])) << 16
	}
	caps &^= unreadableCaps
	binary.LittleEndian.PutUint16(p[low:], uint16(caps))
	if len(p) >= high+2 {
		binary.LittleEndian.PutUint16(p[high:], uint16(caps>>16))
	}
	if ext := high + 2 + 7; caps&capClientMySQL == 0 && len(p) >= ext+4 {
		e := binary.LittleEndian.Uint32(p[ext:])
		binary.LittleEndian.PutUint32(p[ext:], e&readableExtendedCaps)
	}
	return g, nil
}

// clientCaps reads the capabilities of the client's handshake response
// (protocol 41: capabilities (4), max packet size (4), charset (1), 19
// filler bytes whose last 4 are MariaDB's extended capabilities); ok is
// false if the proxy cannot read a stream with them (the client asked for
// something the proxy's greeting did not offer, or speaks protocol 320).
func clientCaps(p []byte) (caps uint32, ok bool) {
	if len(p) < 4 {
		return 0, false
	}
	caps = binary.LittleEndian.Uint32(p)
	if caps&capProtocol41 == 0 || caps&unreadableCaps != 0 {
		return caps, false
	}
	if caps&capClientMySQL == 0 && len(p) >= 32 {
		if binary.LittleEndian.Uint32(p[28:])&^readableExtendedCaps != 0 {
			return caps, false
		}
	}
	return caps, true
}
