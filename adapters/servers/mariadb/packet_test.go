package mariadb

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"
)

func TestKind(t *testing.T) {
	for q, want := range map[string]string{
		"SELECT 1":                             KindSelect,
		"  select * from t":                    KindSelect,
		"(SELECT 1) UNION (SELECT 2)":          KindSelect,
		"/* c */ -- line\n# hash\nSELECT":      KindSelect,
		"WITH x AS (SELECT 1) SELECT * FROM x": KindSelect,
		"INSERT INTO t VALUES (1)":             KindInsert,
		"insert ignore into t values(1)":       KindInsert,
		"REPLACE INTO t VALUES (1)":            KindInsert,
		"UPDATE t SET a = 1":                   KindUpdate,
		"DELETE FROM t":                        KindDelete,
		"BEGIN":                                KindBegin,
		"begin work":                           KindBegin,
		"BEGIN NOT ATOMIC SELECT 1; END":       KindOther,
		"START TRANSACTION":                    KindBegin,
		"start transaction read only":          KindBegin,
		"START SLAVE":                          KindOther,
		"COMMIT":                               KindCommit,
		"commit;":                              KindCommit,
		"ROLLBACK":                             KindRollback,
		"SET TRANSACTION ISOLATION LEVEL READ COMMITTED": KindSet,
		"SET @@timestamp = DEFAULT":                      KindSet,
		"CREATE TABLE t (a INT)":                         KindCreate,
		"DROP TABLE IF EXISTS t":                         KindDrop,
		"/*!40101 SET NAMES utf8 */":                     KindSet,
		"/*M!100000 SELECT 1 */":                         KindSelect,
		"DO 1":                                           KindOther,
		"SHOW WARNINGS":                                  KindOther,
		"KILL CONNECTION 3":                              KindOther,
		"":                                               KindOther,
		"/* unterminated":                                KindOther,
		"--comment-less SELECT":                          KindOther,
		"SELECTED":                                       KindOther,
	} {
		if got := Kind(q); got != want {
			t.Errorf("Kind(%q) = %q, want %q", q, got, want)
		}
	}
}

// frames splits payload into packets of at most 0xFFFFFF bytes (and an
// empty last one when needed), numbered from seq.
func frames(payload []byte, seq byte) []byte {
	var b []byte
	for {
		n := min(len(payload), maxFrame)
		b = append(b, byte(n), byte(n>>8), byte(n>>16), seq)
		b = append(b, payload[:n]...)
		payload = payload[n:]
		seq++
		if n < maxFrame {
			return b
		}
	}
}

func TestReadPacketJoinsFrames(t *testing.T) {
	big := bytes.Repeat([]byte{'x'}, maxFrame)                       // a full frame, then an empty one
	bigger := append(bytes.Repeat([]byte{'y'}, maxFrame), "tail"...) // two frames
	payloads := [][]byte{[]byte("\x03SELECT 1"), big, bigger, {}}
	var stream []byte
	var ends []int
	for i, p := range payloads {
		stream = append(stream, frames(p, byte(i))...)
		ends = append(ends, len(stream))
	}
	r := bufio.NewReader(bytes.NewReader(stream))
	from := 0
	for i, want := range payloads {
		p, err := readPacket(r)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if !bytes.Equal(p.payload, want) || p.seq != byte(i) {
			t.Fatalf("packet %d: payload of %d bytes, seq %d; want %d bytes, seq %d", i, len(p.payload), p.seq, len(want), i)
		}
		if !bytes.Equal(p.raw, stream[from:ends[i]]) {
			t.Fatalf("packet %d: raw bytes differ from the frames read", i)
		}
		from = ends[i]
	}
	if _, err := readPacket(r); err != io.EOF {
		t.Fatalf("at the end: %v, want EOF", err)
	}
	if _, err := readPacket(bufio.NewReader(bytes.NewReader(stream[:6]))); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut short: %v, want ErrUnexpectedEOF", err)
	}
	if _, err := readPacket(bufio.NewReader(bytes.NewReader(stream[ends[0] : ends[1]-4]))); err != io.ErrUnexpectedEOF {
		t.Fatalf("cut before the last frame: %v, want ErrUnexpectedEOF", err)
	}
}

// greetingPacket is a MariaDB 10.11 greeting offering everything.
func greetingPacket(connID uint32) []byte {
	var p []byte
	p = append(p, 10)
	p = append(p, "5.5.5-10.11.19-MariaDB\x00"...)
	p = binary.LittleEndian.AppendUint32(p, connID)
	p = append(p, "scramble"...)
	p = append(p, 0)
	p = binary.LittleEndian.AppendUint16(p, 0xFFFE) // every low capability but CLIENT_MYSQL
	p = append(p, 45, 2, 0)                         // charset, status
	p = binary.LittleEndian.AppendUint16(p, 0xFFFF) // every high capability
	p = append(p, 21, 0, 0, 0, 0, 0, 0)             // scramble length, reserved
	p = binary.LittleEndian.AppendUint32(p, 0x3F)   // MariaDB's extended capabilities
	p = append(p, "more-scramb\x00mysql_native_password\x00"...)
	return frames(p, 0)
}

func TestRewriteGreeting(t *testing.T) {
	raw := greetingPacket(4242)
	orig := bytes.Clone(raw)
	g, err := rewriteGreeting(raw)
	if err != nil {
		t.Fatal(err)
	}
	if g.connID != 4242 {
		t.Fatalf("connection id %d", g.connID)
	}
	p := raw[4:]
	low := 1 + len("5.5.5-10.11.19-MariaDB\x00") + 4 + 8 + 1
	caps := uint32(binary.LittleEndian.Uint16(p[low:])) | uint32(binary.LittleEndian.Uint16(p[low+5:]))<<16
	if caps&unreadableCaps != 0 || caps != 0xFFFFFFFE&^unreadableCaps {
		t.Fatalf("capabilities %#x after the rewrite", caps)
	}
	if ext := binary.LittleEndian.Uint32(p[low+14:]); ext != readableExtendedCaps {
		t.Fatalf("extended capabilities %#x", ext)
	}
	// Nothing else changed.
	diff := 0
	for i := range raw {
		if raw[i] != orig[i] {
			diff++
		}
	}
	if diff > 6 {
		t.Fatalf("%d bytes changed", diff)
	}
	if _, err := rewriteGreeting(frames([]byte{9, 'x', 0}, 0)); err == nil {
		t.Fatal("protocol 9 accepted")
	}
	if _, err := rewriteGreeting(frames([]byte{10, 'x'}, 0)); err == nil {
		t.Fatal("a truncated greeting accepted")
	}
}

func TestClientCaps(t *testing.T) {
	resp := func(caps, ext uint32) []byte {
		p := binary.LittleEndian.AppendUint32(nil, caps)
		p = append(p, make([]byte, 24)...)
		return binary.LittleEndian.AppendUint32(p, ext)
	}
	base := uint32(capProtocol41 | capDeprecateEOF)
	for _, c := range []struct {
		caps, ext uint32
		ok        bool
	}{
		{base, 0, true},
		{base, extExtendedMetadata, true},
		{base | capSSL, 0, false},
		{base | capCompress, 0, false},
		{base | capQueryAttributes, 0, false},
		{base, 1 << 4, false},                 // metadata cache
		{base | capClientMySQL, 1 << 4, true}, // a MySQL client: no extended capabilities
		{capDeprecateEOF, 0, false},           // protocol 320
	} {
		if _, ok := clientCaps(resp(c.caps, c.ext)); ok != c.ok {
			t.Errorf("caps %#x ext %#x: ok %v, want %v", c.caps, c.ext, ok, c.ok)
		}
	}
}

// feedAll feeds packets to a parser and returns at which one it was done.
func feedAll(t *testing.T, r replyParser, packets ...[]byte) int {
	t.Helper()
	for i, p := range packets {
		done, _, err := r.feed(p)
		if err != nil {
			t.Fatalf("packet %d: %v", i, err)
		}
		if done {
			return i
		}
	}
	return -1
}

func TestReplyParserWithoutDeprecateEOF(t *testing.T) {
	col := []byte("\x03def\x00\x00\x00\x01a\x00\x0c\x3f\x00")
	eof := func(status uint16) []byte {
		return binary.LittleEndian.AppendUint16([]byte{iEOF, 0, 0}, status)
	}
	ok := func(status uint16) []byte {
		return binary.LittleEndian.AppendUint16([]byte{iOK, 0, 0}, status)
	}
	row := []byte("\x011")
	errp := []byte("\xff\x19\x04#42S02oops")

	// Two columns, two rows, EOFs: done at the last EOF.
	res := replyParser{kind: replyResult}
	if got := feedAll(t, res, []byte{2}, col, col, eof(0), row, row, eof(0)); got != 6 {
		t.Fatalf("result set done at %d", got)
	}
	// A result set, then an OK: more results.
	if got := feedAll(t, res, []byte{1}, col, eof(statusMoreResults), row, eof(statusMoreResults), ok(0)); got != 5 {
		t.Fatalf("two results done at %d", got)
	}
	if got := feedAll(t, res, ok(statusMoreResults), ok(statusMoreResults), errp); got != 2 {
		t.Fatalf("OK, OK, ERR done at %d", got)
	}
	// An error among the rows.
	if got := feedAll(t, res, []byte{1}, col, eof(0), row, errp); got != 4 {
		t.Fatalf("rows then error done at %d", got)
	}
	// With CLIENT_DEPRECATE_EOF, OK packets with header 0xFE end rows.
	dep := replyParser{kind: replyResult, deprecateEOF: true}
	okFE := func(status uint16) []byte {
		return binary.LittleEndian.AppendUint16([]byte{iEOF, 0, 0}, status)
	}
	if got := feedAll(t, dep, []byte{2}, col, col, row, okFE(statusMoreResults), []byte{1}, col, okFE(0)); got != 7 {
		t.Fatalf("deprecate-EOF results done at %d", got)
	}

	// Prepare: 2 parameters and 1 column, with EOFs after each group.
	prepOK := []byte{iOK, 7, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0}
	prep := replyParser{kind: replyPrepare}
	if got := feedAll(t, prep, prepOK, col, col, eof(0), col, eof(0)); got != 5 {
		t.Fatalf("prepare done at %d", got)
	}
	prep = replyParser{kind: replyPrepare, deprecateEOF: true}
	if got := feedAll(t, prep, prepOK, col, col, col); got != 3 {
		t.Fatalf("prepare without EOFs done at %d", got)
	}
	noParams := []byte{iOK, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	if got := feedAll(t, replyParser{kind: replyPrepare}, noParams); got != 0 {
		t.Fatalf("prepare of nothing done at %d", got)
	}
	if got := feedAll(t, replyParser{kind: replyFieldList}, col, col, eof(0)); got != 2 {
		t.Fatalf("field list done at %d", got)
	}

	// A local infile request, then the OK after the file.
	in := replyParser{kind: replyResult, infile: true}
	if _, infile, err := in.feed([]byte("\xfbfile.csv")); !infile || err != nil {
		t.Fatalf("infile request: %v %v", infile, err)
	}
	if done, _, _ := in.feed(ok(0)); !done {
		t.Fatal("the OK after the file does not end the reply")
	}
	if _, _, err := (&replyParser{kind: replyResult}).feed([]byte("\xfbfile")); err == nil {
		t.Fatal("an infile request to COM_STMT_EXECUTE accepted")
	}
	if _, _, err := (&replyParser{kind: replyResult}).feed([]byte{0}); err == nil {
		t.Fatal("a short OK accepted")
	}
}

func TestCommandName(t *testing.T) {
	if commandName(comStmtExecute) != "COM_STMT_EXECUTE" || commandName(0x77) != "COM_0x77" {
		t.Fatal(commandName(comStmtExecute), commandName(0x77))
	}
	if !strings.HasPrefix(string(commandPacket(comQuery, "SELECT 1")), "\x09\x00\x00\x00\x03SELECT 1") {
		t.Fatalf("%q", commandPacket(comQuery, "SELECT 1"))
	}
}
