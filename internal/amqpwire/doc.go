// Package amqpwire is AMQP 0-9-1 on the wire, as RabbitMQ speaks it: the
// protocol header, frames read whole from a stream and written to one,
// field tables with RabbitMQ's field types, every method of the protocol
// and of RabbitMQ's extensions as a struct that encodes and decodes, and
// content (a content header with the basic properties, then the body in
// frames cut by frame_max).
//
// It is the codec for the served broker, which is to serve the
// simulated RabbitMQ on the wire so that unmodified clients (pika, amqplib,
// amqp091-go) connect to it; so it decodes and encodes both directions, and
// what it decodes of a real peer's frames encodes again to the same bytes
// (tables keep their order, reserved fields and property flags are kept).
// Its table of methods (Methods: ids, names, who sends each, replies,
// no-wait bits, content) is also the one adapters/servers/rabbitmq/amqpproxy
// tracks requests and replies by.
//
// Nothing it is given makes it panic: errors name the frame, method, field
// or property that was wrong and what was wrong with it.
package amqpwire
