package amqpserve

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/lockprover/lockprover/internal/amqpwire"
)

// The handshake's refusals, as RabbitMQ words them (measured on 3.10.8).
const (
	loginRefused = "ACCESS_REFUSED - Login was refused using authentication mechanism PLAIN. For details see the broker logfile."
	user, pass   = "guest", "guest"
)

// handshake runs the connection's handshake up to connection.open, which
// the World takes (evOpen): none of it touches the broker, so it need not
// wait its turn. A refusal is answered as RabbitMQ answers it, and
// returned to be named in the run's notes.
func (c *wireConn) handshake() error {
	c.nc.SetDeadline(time.Now().Add(10 * time.Second)) // RabbitMQ's handshake_timeout
	defer c.nc.SetDeadline(time.Time{})
	if err := c.r.ReadProtocolHeader(); err != nil {
		c.nc.Write([]byte(amqpwire.ProtocolHeader))
		return fmt.Errorf("%v: answered with AMQP 0-9-1's header and closed, as RabbitMQ does (is the implementation speaking AMQP 0-9-1 to the URL init gave it?)", err)
	}
	if err := c.send(0, c.start()); err != nil {
		return err
	}
	var ok amqpwire.ConnectionStartOK
	if err := c.expect(&ok); err != nil {
		return err
	}
	if n, _ := ok.ClientProperties.Get("connection_name"); n != nil {
		if n, ok := n.(string); ok && n != "" {
			c.name = c.p.name + "#" + n
		}
	}
	if !login(ok) {
		if caps, _ := ok.ClientProperties.Get("capabilities"); hasCap(caps, "authentication_failure_close") {
			c.send(0, &amqpwire.ConnectionClose{ReplyCode: 403, ReplyText: loginRefused})
		}
		return fmt.Errorf("login refused (mechanism %s): the served broker takes guest/guest, as the URL says", ok.Mechanism)
	}
	hb := c.p.s.w.ServerHeartbeat()
	if err := c.send(0, &amqpwire.ConnectionTune{ChannelMax: 2047, FrameMax: frameMax, Heartbeat: uint16(hb / time.Second)}); err != nil {
		return err
	}
	var tune amqpwire.ConnectionTuneOK
	if err := c.expect(&tune); err != nil {
		return err
	}
	c.hb = time.Duration(tune.Heartbeat) * time.Second
	if tune.FrameMax >= amqpwire.FrameMinSize {
		c.r.SetFrameMax(tune.FrameMax)
	}
	var open amqpwire.ConnectionOpen
	if err := c.expect(&open); err != nil {
		return err
	}
	if open.VirtualHost != "/" {
		c.send(0, &amqpwire.ConnectionClose{ReplyCode: 530, ReplyText: "NOT_ALLOWED - vhost " + open.VirtualHost + " not found", ClassID: 10, MethodID: 40})
		return fmt.Errorf("vhost %q refused: the served broker has only \"/\", as the URL says", open.VirtualHost)
	}
	return nil
}

// start is connection.start as RabbitMQ sends it.
func (c *wireConn) start() *amqpwire.ConnectionStart {
	return &amqpwire.ConnectionStart{VersionMajor: 0, VersionMinor: 9, ServerProperties: amqpwire.Table{
		{Name: "capabilities", Value: amqpwire.Capabilities()},
		{Name: "cluster_name", Value: "lockprover@sim"},
		{Name: "information", Value: "lockprover's simulated RabbitMQ (sim/rabbitmqsim), served by adapters/served/amqpserve"},
		{Name: "platform", Value: "lockprover"},
		{Name: "product", Value: "RabbitMQ"},
		{Name: "version", Value: c.p.s.o.Version},
	}, Mechanisms: "PLAIN AMQPLAIN", Locales: "en_US"}
}

// expect reads the next frame, which must be the method m is (heartbeats
// aside).
func (c *wireConn) expect(m amqpwire.Method) error {
	cmd, err := c.read()
	if err != nil {
		return err
	}
	if cmd.ch != 0 || cmd.id != amqpwire.IDOf(m) {
		return fmt.Errorf("%v on channel %d during the handshake, where %v was due", cmd.id, cmd.ch, amqpwire.IDOf(m))
	}
	return copyMethod(m, cmd.m)
}

// copyMethod sets *dst to *src, both pointers to the same method struct.
func copyMethod(dst, src amqpwire.Method) error {
	switch d := dst.(type) {
	case *amqpwire.ConnectionStartOK:
		*d = *src.(*amqpwire.ConnectionStartOK)
	case *amqpwire.ConnectionTuneOK:
		*d = *src.(*amqpwire.ConnectionTuneOK)
	case *amqpwire.ConnectionOpen:
		*d = *src.(*amqpwire.ConnectionOpen)
	default:
		return errors.New("amqpserve: no copy for this method")
	}
	return nil
}

// login says whether start-ok's credentials are guest's, by PLAIN or
// AMQPLAIN.
func login(ok amqpwire.ConnectionStartOK) bool {
	switch ok.Mechanism {
	case "PLAIN":
		parts := strings.Split(ok.Response, "\x00")
		return len(parts) == 3 && parts[1] == user && parts[2] == pass
	case "AMQPLAIN":
		t, err := amqpwire.DecodeFields([]byte(ok.Response))
		if err != nil {
			return false
		}
		u, _ := t.Get("LOGIN")
		w, _ := t.Get("PASSWORD")
		return u == user && w == pass
	}
	return false
}

func hasCap(caps any, name string) bool {
	t, ok := caps.(amqpwire.Table)
	if !ok {
		return false
	}
	v, _ := t.Get(name)
	return v == true
}
