package rabbitmq

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// ServerVersion is the version the broker at url announces in the server
// properties of its connection.start ("3.10.8", "4.3.6"), read by one
// connection, opened and closed within ctx.
func ServerVersion(ctx context.Context, url string) (string, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	var nc net.Conn
	cfg := amqp.Config{
		Heartbeat:  10 * time.Second,
		Properties: amqp.Table{"connection_name": "lockprover-version"},
		Dial: func(network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			nc = c
			return c, err
		},
	}
	stop := context.AfterFunc(ctx, func() {
		if nc != nil {
			nc.Close()
		}
	})
	defer stop()
	c, err := amqp.DialConfig(url, cfg)
	if err != nil {
		return "", fmt.Errorf("rabbitmq: the broker's version: %s", Redact(err.Error()))
	}
	defer c.Close()
	v, _ := c.Properties["version"].(string)
	if v == "" {
		return "", fmt.Errorf("rabbitmq: the broker at %s announces no version", RedactURL(url))
	}
	return v, nil
}

// ExclusiveDeleteRace says whether RabbitMQ version v has the
// exclusive-delete race (docs/broker-semantics.md, 7c and 1b): a
// connection that dies with an exclusive declare of a name in flight
// makes the broker delete whatever queue then bears that name, another
// connection's too. Measured: it strikes on 3.10.8 and 4.0.5, not on
// 4.3.6; RabbitMQ's fix (rabbitmq-server#15276, the owner checked before
// the delete) is in the notes of 4.2.3, not in those of any 4.1 patch.
// So: every version before 4.2.3. A version that cannot be read is not
// known to have the race and is not said to have it, so that no history
// blames the race for a queue a fixed broker did not delete.
func ExclusiveDeleteRace(v string) bool {
	major, minor, patch, ok := semver(v)
	switch {
	case !ok:
		return false
	case major != 4:
		return major < 4
	case minor < 2:
		return true
	case minor == 2:
		return patch < 3
	}
	return false
}

// semver reads "MAJOR.MINOR.PATCH" (a suffix after the patch, such as
// "-rc.1" or "+deb13u2", ignored).
func semver(v string) (major, minor, patch int, ok bool) {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) != 3 {
		return 0, 0, 0, false
	}
	p := parts[2]
	if i := strings.IndexFunc(p, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		p = p[:i]
	}
	var err error
	var n [3]int
	for i, s := range []string{parts[0], parts[1], p} {
		if n[i], err = strconv.Atoi(s); err != nil {
			return 0, 0, 0, false
		}
	}
	return n[0], n[1], n[2], true
}
