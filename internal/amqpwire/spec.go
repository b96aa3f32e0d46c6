package amqpwire

// The methods of AMQP 0-9-1 with RabbitMQ's extensions, one struct each,
// their fields in the order and with the names of the spec
// (amqp0-9-1.extended.xml). A field named reserved in the spec is kept
// unexported, so that a method decoded and encoded again gives the same
// bytes. The table of methods (methods.go) says which struct is which
// method.

// ConnectionStart is connection.start: the server's first method: its properties, mechanisms and locales.
type ConnectionStart struct {
	VersionMajor     uint8
	VersionMinor     uint8
	ServerProperties Table
	Mechanisms       string
	Locales          string
}

func (m *ConnectionStart) fields(c *codec) {
	c.octet("version-major", &m.VersionMajor)
	c.octet("version-minor", &m.VersionMinor)
	c.table("server-properties", &m.ServerProperties)
	c.longstr("mechanisms", &m.Mechanisms)
	c.longstr("locales", &m.Locales)
}

// ConnectionStartOK is connection.start-ok: the client's properties and its choice of mechanism, with the response (PLAIN: "\x00user\x00password").
type ConnectionStartOK struct {
	ClientProperties Table
	Mechanism        string
	Response         string
	Locale           string
}

func (m *ConnectionStartOK) fields(c *codec) {
	c.table("client-properties", &m.ClientProperties)
	c.shortstr("mechanism", &m.Mechanism)
	c.longstr("response", &m.Response)
	c.shortstr("locale", &m.Locale)
}

// ConnectionSecure is connection.secure: a further SASL challenge (RabbitMQ's PLAIN and AMQPLAIN need none).
type ConnectionSecure struct {
	Challenge string
}

func (m *ConnectionSecure) fields(c *codec) {
	c.longstr("challenge", &m.Challenge)
}

// ConnectionSecureOK is connection.secure-ok: the client's answer to a challenge.
type ConnectionSecureOK struct {
	Response string
}

func (m *ConnectionSecureOK) fields(c *codec) {
	c.longstr("response", &m.Response)
}

// ConnectionTune is connection.tune: the server's limits: channels, frame size, heartbeat in seconds.
type ConnectionTune struct {
	ChannelMax uint16
	FrameMax   uint32
	Heartbeat  uint16
}

func (m *ConnectionTune) fields(c *codec) {
	c.short("channel-max", &m.ChannelMax)
	c.long("frame-max", &m.FrameMax)
	c.short("heartbeat", &m.Heartbeat)
}

// ConnectionTuneOK is connection.tune-ok: the values the client settled on.
type ConnectionTuneOK struct {
	ChannelMax uint16
	FrameMax   uint32
	Heartbeat  uint16
}

func (m *ConnectionTuneOK) fields(c *codec) {
	c.short("channel-max", &m.ChannelMax)
	c.long("frame-max", &m.FrameMax)
	c.short("heartbeat", &m.Heartbeat)
}

// ConnectionOpen is connection.open: the client opens a virtual host.
type ConnectionOpen struct {
	VirtualHost string
	reserved1   string
	reserved2   bool
}

func (m *ConnectionOpen) fields(c *codec) {
	c.shortstr("virtual-host", &m.VirtualHost)
	c.shortstr("reserved-1", &m.reserved1)
	c.bit("reserved-2", &m.reserved2)
}

// ConnectionOpenOK is connection.open-ok: the server lets the client in.
type ConnectionOpenOK struct {
	reserved1 string
}

func (m *ConnectionOpenOK) fields(c *codec) {
	c.shortstr("reserved-1", &m.reserved1)
}

// ConnectionClose is connection.close: either side ends the connection, with a reply code and text and the method that failed.
type ConnectionClose struct {
	ReplyCode uint16
	ReplyText string
	ClassID   uint16
	MethodID  uint16
}

func (m *ConnectionClose) fields(c *codec) {
	c.short("reply-code", &m.ReplyCode)
	c.shortstr("reply-text", &m.ReplyText)
	c.short("class-id", &m.ClassID)
	c.short("method-id", &m.MethodID)
}

// ConnectionCloseOK is connection.close-ok: the answer to connection.close, after which the socket closes.
type ConnectionCloseOK struct{}

func (*ConnectionCloseOK) fields(*codec) {}

// ConnectionBlocked is connection.blocked: the server stops reading publishes (a resource alarm), to clients that announced the capability.
type ConnectionBlocked struct {
	Reason string
}

func (m *ConnectionBlocked) fields(c *codec) {
	c.shortstr("reason", &m.Reason)
}

// ConnectionUnblocked is connection.unblocked: the alarm is over.
type ConnectionUnblocked struct{}

func (*ConnectionUnblocked) fields(*codec) {}

// ConnectionUpdateSecret is connection.update-secret: the client replaces its credentials (an OAuth token) on an open connection.
type ConnectionUpdateSecret struct {
	NewSecret string
	Reason    string
}

func (m *ConnectionUpdateSecret) fields(c *codec) {
	c.longstr("new-secret", &m.NewSecret)
	c.shortstr("reason", &m.Reason)
}

// ConnectionUpdateSecretOK is connection.update-secret-ok: the server took the new secret.
type ConnectionUpdateSecretOK struct{}

func (*ConnectionUpdateSecretOK) fields(*codec) {}

// ChannelOpen is channel.open: the client opens a channel.
type ChannelOpen struct {
	reserved1 string
}

func (m *ChannelOpen) fields(c *codec) {
	c.shortstr("reserved-1", &m.reserved1)
}

// ChannelOpenOK is channel.open-ok: the channel is open.
type ChannelOpenOK struct {
	reserved1 string
}

func (m *ChannelOpenOK) fields(c *codec) {
	c.longstr("reserved-1", &m.reserved1)
}

// ChannelFlow is channel.flow: either side pauses or resumes content (RabbitMQ refuses active=false from a client).
type ChannelFlow struct {
	Active bool
}

func (m *ChannelFlow) fields(c *codec) {
	c.bit("active", &m.Active)
}

// ChannelFlowOK is channel.flow-ok: the answer to channel.flow.
type ChannelFlowOK struct {
	Active bool
}

func (m *ChannelFlowOK) fields(c *codec) {
	c.bit("active", &m.Active)
}

// ChannelClose is channel.close: either side closes a channel, with a reply code and text and the method that failed.
type ChannelClose struct {
	ReplyCode uint16
	ReplyText string
	ClassID   uint16
	MethodID  uint16
}

func (m *ChannelClose) fields(c *codec) {
	c.short("reply-code", &m.ReplyCode)
	c.shortstr("reply-text", &m.ReplyText)
	c.short("class-id", &m.ClassID)
	c.short("method-id", &m.MethodID)
}

// ChannelCloseOK is channel.close-ok: the answer to channel.close.
type ChannelCloseOK struct{}

func (*ChannelCloseOK) fields(*codec) {}

// ExchangeDeclare is exchange.declare: creates an exchange, or checks it (passive).
type ExchangeDeclare struct {
	reserved1  uint16
	Exchange   string
	Type       string
	Passive    bool
	Durable    bool
	AutoDelete bool
	Internal   bool
	NoWait     bool
	Arguments  Table
}

func (m *ExchangeDeclare) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("exchange", &m.Exchange)
	c.shortstr("type", &m.Type)
	c.bit("passive", &m.Passive)
	c.bit("durable", &m.Durable)
	c.bit("auto-delete", &m.AutoDelete)
	c.bit("internal", &m.Internal)
	c.bit("no-wait", &m.NoWait)
	c.table("arguments", &m.Arguments)
}

// ExchangeDeclareOK is exchange.declare-ok: the answer to exchange.declare.
type ExchangeDeclareOK struct{}

func (*ExchangeDeclareOK) fields(*codec) {}

// ExchangeDelete is exchange.delete: deletes an exchange.
type ExchangeDelete struct {
	reserved1 uint16
	Exchange  string
	IfUnused  bool
	NoWait    bool
}

func (m *ExchangeDelete) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("exchange", &m.Exchange)
	c.bit("if-unused", &m.IfUnused)
	c.bit("no-wait", &m.NoWait)
}

// ExchangeDeleteOK is exchange.delete-ok: the answer to exchange.delete.
type ExchangeDeleteOK struct{}

func (*ExchangeDeleteOK) fields(*codec) {}

// ExchangeBind is exchange.bind: binds an exchange to an exchange (RabbitMQ's extension).
type ExchangeBind struct {
	reserved1   uint16
	Destination string
	Source      string
	RoutingKey  string
	NoWait      bool
	Arguments   Table
}

func (m *ExchangeBind) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("destination", &m.Destination)
	c.shortstr("source", &m.Source)
	c.shortstr("routing-key", &m.RoutingKey)
	c.bit("no-wait", &m.NoWait)
	c.table("arguments", &m.Arguments)
}

// ExchangeBindOK is exchange.bind-ok: the answer to exchange.bind.
type ExchangeBindOK struct{}

func (*ExchangeBindOK) fields(*codec) {}

// ExchangeUnbind is exchange.unbind: removes an exchange-to-exchange binding.
type ExchangeUnbind struct {
	reserved1   uint16
	Destination string
	Source      string
	RoutingKey  string
	NoWait      bool
	Arguments   Table
}

func (m *ExchangeUnbind) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("destination", &m.Destination)
	c.shortstr("source", &m.Source)
	c.shortstr("routing-key", &m.RoutingKey)
	c.bit("no-wait", &m.NoWait)
	c.table("arguments", &m.Arguments)
}

// ExchangeUnbindOK is exchange.unbind-ok: the answer to exchange.unbind (method 51, not 41).
type ExchangeUnbindOK struct{}

func (*ExchangeUnbindOK) fields(*codec) {}

// QueueDeclare is queue.declare: creates a queue, or checks it (passive); an empty name asks the server to name it.
type QueueDeclare struct {
	reserved1  uint16
	Queue      string
	Passive    bool
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	NoWait     bool
	Arguments  Table
}

func (m *QueueDeclare) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("queue", &m.Queue)
	c.bit("passive", &m.Passive)
	c.bit("durable", &m.Durable)
	c.bit("exclusive", &m.Exclusive)
	c.bit("auto-delete", &m.AutoDelete)
	c.bit("no-wait", &m.NoWait)
	c.table("arguments", &m.Arguments)
}

// QueueDeclareOK is queue.declare-ok: the queue's name and its ready messages and consumers.
type QueueDeclareOK struct {
	Queue         string
	MessageCount  uint32
	ConsumerCount uint32
}

func (m *QueueDeclareOK) fields(c *codec) {
	c.shortstr("queue", &m.Queue)
	c.long("message-count", &m.MessageCount)
	c.long("consumer-count", &m.ConsumerCount)
}

// QueueBind is queue.bind: binds a queue to an exchange.
type QueueBind struct {
	reserved1  uint16
	Queue      string
	Exchange   string
	RoutingKey string
	NoWait     bool
	Arguments  Table
}

func (m *QueueBind) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("queue", &m.Queue)
	c.shortstr("exchange", &m.Exchange)
	c.shortstr("routing-key", &m.RoutingKey)
	c.bit("no-wait", &m.NoWait)
	c.table("arguments", &m.Arguments)
}

// QueueBindOK is queue.bind-ok: the answer to queue.bind.
type QueueBindOK struct{}

func (*QueueBindOK) fields(*codec) {}

// QueueUnbind is queue.unbind: removes a binding (it has no no-wait bit).
type QueueUnbind struct {
	reserved1  uint16
	Queue      string
	Exchange   string
	RoutingKey string
	Arguments  Table
}

func (m *QueueUnbind) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("queue", &m.Queue)
	c.shortstr("exchange", &m.Exchange)
	c.shortstr("routing-key", &m.RoutingKey)
	c.table("arguments", &m.Arguments)
}

// QueueUnbindOK is queue.unbind-ok: the answer to queue.unbind.
type QueueUnbindOK struct{}

func (*QueueUnbindOK) fields(*codec) {}

// QueuePurge is queue.purge: removes a queue's ready messages.
type QueuePurge struct {
	reserved1 uint16
	Queue     string
	NoWait    bool
}

func (m *QueuePurge) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("queue", &m.Queue)
	c.bit("no-wait", &m.NoWait)
}

// QueuePurgeOK is queue.purge-ok: how many messages went.
type QueuePurgeOK struct {
	MessageCount uint32
}

func (m *QueuePurgeOK) fields(c *codec) {
	c.long("message-count", &m.MessageCount)
}

// QueueDelete is queue.delete: deletes a queue, unless unused or empty when asked.
type QueueDelete struct {
	reserved1 uint16
	Queue     string
	IfUnused  bool
	IfEmpty   bool
	NoWait    bool
}

func (m *QueueDelete) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("queue", &m.Queue)
	c.bit("if-unused", &m.IfUnused)
	c.bit("if-empty", &m.IfEmpty)
	c.bit("no-wait", &m.NoWait)
}

// QueueDeleteOK is queue.delete-ok: how many ready messages went with the queue.
type QueueDeleteOK struct {
	MessageCount uint32
}

func (m *QueueDeleteOK) fields(c *codec) {
	c.long("message-count", &m.MessageCount)
}

// BasicQos is basic.qos: limits unacknowledged deliveries, per consumer or per channel (global).
type BasicQos struct {
	PrefetchSize  uint32
	PrefetchCount uint16
	Global        bool
}

func (m *BasicQos) fields(c *codec) {
	c.long("prefetch-size", &m.PrefetchSize)
	c.short("prefetch-count", &m.PrefetchCount)
	c.bit("global", &m.Global)
}

// BasicQosOK is basic.qos-ok: the answer to basic.qos.
type BasicQosOK struct{}

func (*BasicQosOK) fields(*codec) {}

// BasicConsume is basic.consume: starts a consumer; an empty tag asks the server to name it.
type BasicConsume struct {
	reserved1   uint16
	Queue       string
	ConsumerTag string
	NoLocal     bool
	NoAck       bool
	Exclusive   bool
	NoWait      bool
	Arguments   Table
}

func (m *BasicConsume) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("queue", &m.Queue)
	c.shortstr("consumer-tag", &m.ConsumerTag)
	c.bit("no-local", &m.NoLocal)
	c.bit("no-ack", &m.NoAck)
	c.bit("exclusive", &m.Exclusive)
	c.bit("no-wait", &m.NoWait)
	c.table("arguments", &m.Arguments)
}

// BasicConsumeOK is basic.consume-ok: the consumer's tag.
type BasicConsumeOK struct {
	ConsumerTag string
}

func (m *BasicConsumeOK) fields(c *codec) {
	c.shortstr("consumer-tag", &m.ConsumerTag)
}

// BasicCancel is basic.cancel: ends a consumer; the server sends it too when the queue goes (consumer_cancel_notify).
type BasicCancel struct {
	ConsumerTag string
	NoWait      bool
}

func (m *BasicCancel) fields(c *codec) {
	c.shortstr("consumer-tag", &m.ConsumerTag)
	c.bit("no-wait", &m.NoWait)
}

// BasicCancelOK is basic.cancel-ok: the answer to basic.cancel.
type BasicCancelOK struct {
	ConsumerTag string
}

func (m *BasicCancelOK) fields(c *codec) {
	c.shortstr("consumer-tag", &m.ConsumerTag)
}

// BasicPublish is basic.publish: a message for an exchange, followed by its content.
type BasicPublish struct {
	reserved1  uint16
	Exchange   string
	RoutingKey string
	Mandatory  bool
	Immediate  bool
}

func (m *BasicPublish) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("exchange", &m.Exchange)
	c.shortstr("routing-key", &m.RoutingKey)
	c.bit("mandatory", &m.Mandatory)
	c.bit("immediate", &m.Immediate)
}

// BasicReturn is basic.return: a mandatory message that no queue took, with its content.
type BasicReturn struct {
	ReplyCode  uint16
	ReplyText  string
	Exchange   string
	RoutingKey string
}

func (m *BasicReturn) fields(c *codec) {
	c.short("reply-code", &m.ReplyCode)
	c.shortstr("reply-text", &m.ReplyText)
	c.shortstr("exchange", &m.Exchange)
	c.shortstr("routing-key", &m.RoutingKey)
}

// BasicDeliver is basic.deliver: a message for a consumer, with its content.
type BasicDeliver struct {
	ConsumerTag string
	DeliveryTag uint64
	Redelivered bool
	Exchange    string
	RoutingKey  string
}

func (m *BasicDeliver) fields(c *codec) {
	c.shortstr("consumer-tag", &m.ConsumerTag)
	c.longlong("delivery-tag", &m.DeliveryTag)
	c.bit("redelivered", &m.Redelivered)
	c.shortstr("exchange", &m.Exchange)
	c.shortstr("routing-key", &m.RoutingKey)
}

// BasicGet is basic.get: asks for one message from a queue.
type BasicGet struct {
	reserved1 uint16
	Queue     string
	NoAck     bool
}

func (m *BasicGet) fields(c *codec) {
	c.short("reserved-1", &m.reserved1)
	c.shortstr("queue", &m.Queue)
	c.bit("no-ack", &m.NoAck)
}

// BasicGetOK is basic.get-ok: one message, with its content.
type BasicGetOK struct {
	DeliveryTag  uint64
	Redelivered  bool
	Exchange     string
	RoutingKey   string
	MessageCount uint32
}

func (m *BasicGetOK) fields(c *codec) {
	c.longlong("delivery-tag", &m.DeliveryTag)
	c.bit("redelivered", &m.Redelivered)
	c.shortstr("exchange", &m.Exchange)
	c.shortstr("routing-key", &m.RoutingKey)
	c.long("message-count", &m.MessageCount)
}

// BasicGetEmpty is basic.get-empty: the queue had no ready message.
type BasicGetEmpty struct {
	reserved1 string
}

func (m *BasicGetEmpty) fields(c *codec) {
	c.shortstr("reserved-1", &m.reserved1)
}

// BasicAck is basic.ack: the client acknowledges deliveries, or the server confirms publishes.
type BasicAck struct {
	DeliveryTag uint64
	Multiple    bool
}

func (m *BasicAck) fields(c *codec) {
	c.longlong("delivery-tag", &m.DeliveryTag)
	c.bit("multiple", &m.Multiple)
}

// BasicReject is basic.reject: the client refuses one delivery.
type BasicReject struct {
	DeliveryTag uint64
	Requeue     bool
}

func (m *BasicReject) fields(c *codec) {
	c.longlong("delivery-tag", &m.DeliveryTag)
	c.bit("requeue", &m.Requeue)
}

// BasicRecoverAsync is basic.recover-async: redelivers unacknowledged messages, without an answer (deprecated).
type BasicRecoverAsync struct {
	Requeue bool
}

func (m *BasicRecoverAsync) fields(c *codec) {
	c.bit("requeue", &m.Requeue)
}

// BasicRecover is basic.recover: redelivers unacknowledged messages.
type BasicRecover struct {
	Requeue bool
}

func (m *BasicRecover) fields(c *codec) {
	c.bit("requeue", &m.Requeue)
}

// BasicRecoverOK is basic.recover-ok: the answer to basic.recover.
type BasicRecoverOK struct{}

func (*BasicRecoverOK) fields(*codec) {}

// BasicNack is basic.nack: refuses deliveries, or the server refuses publishes under confirms (RabbitMQ's extension).
type BasicNack struct {
	DeliveryTag uint64
	Multiple    bool
	Requeue     bool
}

func (m *BasicNack) fields(c *codec) {
	c.longlong("delivery-tag", &m.DeliveryTag)
	c.bit("multiple", &m.Multiple)
	c.bit("requeue", &m.Requeue)
}

// TxSelect is tx.select: puts the channel in transaction mode.
type TxSelect struct{}

func (*TxSelect) fields(*codec) {}

// TxSelectOK is tx.select-ok: the answer to tx.select.
type TxSelectOK struct{}

func (*TxSelectOK) fields(*codec) {}

// TxCommit is tx.commit: commits the channel's transaction.
type TxCommit struct{}

func (*TxCommit) fields(*codec) {}

// TxCommitOK is tx.commit-ok: the answer to tx.commit.
type TxCommitOK struct{}

func (*TxCommitOK) fields(*codec) {}

// TxRollback is tx.rollback: abandons the channel's transaction.
type TxRollback struct{}

func (*TxRollback) fields(*codec) {}

// TxRollbackOK is tx.rollback-ok: the answer to tx.rollback.
type TxRollbackOK struct{}

func (*TxRollbackOK) fields(*codec) {}

// ConfirmSelect is confirm.select: puts the channel in confirm mode (RabbitMQ's extension).
type ConfirmSelect struct {
	NoWait bool
}

func (m *ConfirmSelect) fields(c *codec) {
	c.bit("nowait", &m.NoWait)
}

// ConfirmSelectOK is confirm.select-ok: the answer to confirm.select.
type ConfirmSelectOK struct{}

func (*ConfirmSelectOK) fields(*codec) {}
