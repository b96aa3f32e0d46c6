package rabbitmq

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"
)

// LogFile asks the broker (rabbitmqctl eval rabbit:log_locations()) where
// its main log is: a path on this machine when the broker runs here. An
// error when rabbitmqctl cannot answer or the broker logs to no file.
func (c *Ctl) LogFile(ctx context.Context) (string, error) {
	out, err := c.run(ctx, "eval", "rabbit:log_locations().")
	if err != nil {
		return "", err
	}
	for _, q := range regexp.MustCompile(`"([^"]+)"`).FindAllStringSubmatch(out, -1) {
		if p := q[1]; strings.HasSuffix(p, ".log") && !strings.HasSuffix(p, "_upgrade.log") {
			return p, nil
		}
	}
	return "", fmt.Errorf("rabbitmqctl: the broker logs to no file (%s)", strings.TrimSpace(out))
}

// A log record: "2026-11-23 11:57:10.706163+00:00 [error] <0.9660.1> text".
var logLine = regexp.MustCompile(`^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+[+-]\d\d:\d\d) \[(\w+)\] (<[\d.]+>) (.*)$`)

// A connection's own record naming its client's address: "accepting AMQP
// connection <0.9660.1> (127.0.0.1:37540 -> 127.0.0.1:5672...".
var connLine = regexp.MustCompile(`^(?:accepting|closing) AMQP connection (<[\d.]+>) \(([^ ]+) -> `)

// LogReasons reads RabbitMQ's log at path and gives, for each client
// address (the broker names a connection "ADDRESS -> BROKER"; a proxy's
// is amqpproxy.ServerEvent.Local), what the broker logged as an error or a
// warning of that connection at or after since: why it closed it
// ("missed heartbeats from client, timeout: 1s"), in the log's order. The
// records that only say a connection opens or closes are left out, as
// are a channel's errors (a channel's own, not its connection's). Lines
// that are not RabbitMQ's records are skipped.
func LogReasons(path string, since time.Time) (map[string][]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	addr := map[string]string{} // a connection's Erlang pid -> its client's address
	out := map[string][]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		m := logLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		at, err := time.Parse("2006-01-02 15:04:05.999999999-07:00", m[1])
		if err != nil || at.Before(since) {
			continue
		}
		level, pid, text := m[2], m[3], m[4]
		if c := connLine.FindStringSubmatch(text); c != nil {
			if c[1] == pid {
				addr[pid] = c[2]
			}
			continue
		}
		a, ok := addr[pid]
		if !ok || (level != "error" && level != "warning") {
			continue
		}
		out[a] = append(out[a], text)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}
