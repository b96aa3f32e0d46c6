#!/usr/bin/python3
"""broker.Broker's connections through pika 1.2 (Debian's python3-pika), for
the wire differential (adapters/served/amqpserve, clients_test.go).

It reads one JSON request a line on stdin and answers each, in order, on
stdout, with the request's id and its result, or the error as pika raised
it. After each request it has pika write what it left buffered, and
between requests it has pika read every open connection (every 5 ms), so
that what the broker sends unasked (a connection.close) is seen without a
request; every asynchronous event pika reports (a connection or a
channel closed, a message returned, a delivery, a consumer the broker
cancelled) is written as it comes, before the answer of the request it came
in. The requests (op and fields; the answer's fields after the arrow):

    dial url name heartbeat (s; 0 the broker's, -1 off)  -> conn
    channel conn                                          -> chan
    confirm chan
    declare chan queue passive durable exclusive auto_delete args
                                     -> queue messages consumers
    delete chan queue if_unused if_empty                  -> count
    purge chan queue                                      -> count
    bind chan queue exchange key
    publish chan exchange key mandatory immediate persistent body (base64)
                                     -> acked returned
    get chan queue                                        -> got
    consume chan queue exclusive                          -> tag
    close_channel chan
    close conn

An error is {"kind", "class", "code", "text", "scope"}: kind "broker" (the
broker closed the channel or the connection: its reply code and text),
"closed" (used after it closed), "lost" (the socket went without an AMQP
close), "refused" (no broker at the address), "other" (anything else, by
pika's class and text); scope "channel" or "connection". It writes
{"event": "hello", "library": "pika <version>"} first.
"""

import base64
import json
import os
import select
import sys
import time

import pika
from pika import exceptions as X

conns = {}  # id -> BlockingConnection
chans = {}  # id -> (connection id, BlockingChannel)
ids = [0]


def out(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def fresh():
    ids[0] += 1
    return ids[0]


def describe(e, conn=None):
    """The error e as the Go side takes it (see the module's doc)."""
    def err(kind, code, text, scope):
        return {"kind": kind, "class": type(e).__name__, "code": code, "text": str(text), "scope": scope}
    if isinstance(e, X.ChannelClosedByBroker):
        return err("broker", e.reply_code, e.reply_text, "channel")
    if isinstance(e, X.ConnectionClosedByBroker):
        return err("broker", e.reply_code, e.reply_text, "connection")
    if isinstance(e, (X.StreamLostError, X.AMQPHeartbeatTimeout)):
        return err("lost", 501, e, "connection")
    if isinstance(e, (X.ChannelWrongStateError, X.ChannelClosedByClient)):
        scope = "connection" if conn is not None and conn.is_closed else "channel"
        return err("closed", 504, e, scope)
    if isinstance(e, (X.ConnectionWrongStateError, X.ConnectionClosedByClient)):
        return err("closed", 504, e, "connection")
    if isinstance(e, X.AMQPConnectionError) and "refused" in repr(e).lower():
        return err("refused", 0, repr(e), "connection")
    return err("other", 0, str(e) or repr(e), "")


def dial(req):
    params = pika.URLParameters(req["url"])
    if req.get("name"):
        params.client_properties = {"connection_name": req["name"]}
    hb = req.get("heartbeat", 0)
    # pika's None takes the broker's proposal, 0 turns heartbeats off.
    params.heartbeat = None if hb == 0 else (0 if hb < 0 else int(hb))
    params.connection_attempts = 1
    conn = pika.BlockingConnection(params)
    cid = fresh()
    conns[cid] = conn
    conn._impl.add_on_close_callback(
        lambda _c, reason: out({"event": "conn-closed", "conn": cid, "error": describe(reason)}))
    return {"conn": cid}


def channel(req):
    cid = req["conn"]
    conn = conns[cid]
    ch = conn.channel()
    hid = fresh()
    chans[hid] = (cid, ch)
    ch._impl.add_on_close_callback(
        lambda _c, reason: out({"event": "chan-closed", "chan": hid, "error": describe(reason, conn)}))
    ch.add_on_cancel_callback(
        lambda frame: out({"event": "cancelled", "chan": hid, "tag": frame.method.consumer_tag}))
    return {"chan": hid}


def chan(req):
    return chans[req["chan"]][1]


def declare(req):
    ok = chan(req).queue_declare(req.get("queue", ""), passive=req.get("passive", False),
                                 durable=req.get("durable", False), exclusive=req.get("exclusive", False),
                                 auto_delete=req.get("auto_delete", False), arguments=req.get("args"))
    m = ok.method
    return {"queue": m.queue, "messages": m.message_count, "consumers": m.consumer_count}


def publish(req):
    if req.get("immediate"):
        raise ValueError("pika 1.2 cannot publish with immediate set")
    hid, ch = req["chan"], chan(req)
    props = pika.BasicProperties(delivery_mode=2 if req.get("persistent") else 1)
    body = base64.b64decode(req.get("body") or "")
    try:
        ch.basic_publish(req.get("exchange", ""), req.get("key", ""), body, props, mandatory=req.get("mandatory", False))
        return {"acked": True, "returned": False}
    except X.UnroutableError as e:
        returned(hid, e.messages)
        return {"acked": True, "returned": True}
    except X.NackError as e:
        returned(hid, e.messages)
        return {"acked": False, "returned": bool(e.messages)}


def returned(hid, messages):
    for m in messages:
        out({"event": "return", "chan": hid, "code": m.method.reply_code, "text": m.method.reply_text})


def consume(req):
    hid = req["chan"]

    def delivered(_ch, method, _props, _body):
        # Never acknowledged: it stays unacked until the channel closes.
        out({"event": "deliver", "chan": hid, "tag": method.consumer_tag, "delivery_tag": method.delivery_tag})
    tag = chan(req).basic_consume(req["queue"], delivered, auto_ack=False, exclusive=req.get("exclusive", False))
    return {"tag": tag}


def get(req):
    ch, conn = chan(req), conn_of(req)
    if ch.is_closed and conn.is_open and taken(conn, ch):
        # pika would write basic.get on a channel number another of the
        # connection's channels holds now, where the broker takes it as
        # that channel's (closing it, or handing it a message) behind the
        # harness's back: the harness does not let it, and answers as pika
        # does on a closed channel.
        raise Said(describe(X.ChannelWrongStateError("Channel is closed."), conn))
    try:
        method, _props, _body = ch.basic_get(req["queue"], auto_ack=False)
    except X.ChannelWrongStateError as e:
        said = Said(describe(e, conn_of(req)))  # as it was when pika raised
        await_close(conn_of(req))
        raise said
    return {"got": method is not None}


def taken(conn, ch):
    """Whether another channel of conn holds ch's number now (pika gives
    a closed channel's number to the next channel opened)."""
    impl = conn._impl._channels.get(ch.channel_number)
    return impl is not None and impl is not ch._impl


class Said(Exception):
    """An error already described, as it was when it was raised."""

    def __init__(self, desc):
        super().__init__(desc["text"])
        self.desc = desc


def await_close(conn):
    """pika's basic_get on a closed channel writes basic.get all the same,
    then raises; the broker answers a method on a channel not open by
    closing the connection (504). Wait for that close, 5 s at most, as the
    harness waits after a fault, so that when it comes does not race the
    next requests."""
    deadline = time.monotonic() + 5
    while conn is not None and conn.is_open and time.monotonic() < deadline:
        try:
            conn.process_data_events(0.01)
        except Exception:
            return  # its close callback has said why


def close(req):
    conns[req["conn"]].close()


OPS = {
    "dial": dial,
    "channel": channel,
    "confirm": lambda req: chan(req).confirm_delivery(),
    "declare": declare,
    "delete": lambda req: {"count": chan(req).queue_delete(
        req["queue"], if_unused=req.get("if_unused", False), if_empty=req.get("if_empty", False)).method.message_count},
    "purge": lambda req: {"count": chan(req).queue_purge(req["queue"]).method.message_count},
    "bind": lambda req: chan(req).queue_bind(req["queue"], req.get("exchange", ""), routing_key=req.get("key")),
    "publish": publish,
    "get": get,
    "consume": consume,
    "close_channel": lambda req: chan(req).close(),
    "close": close,
}


def conn_of(req):
    """The connection a request is on, if it names one it knows."""
    if "conn" in req:
        return conns.get(req["conn"])
    if req.get("chan") in chans:
        return conns.get(chans[req["chan"]][0])
    return None


def serve(req):
    try:
        op = OPS.get(req.get("op"))
        if op is None:
            raise ValueError("no such request: %r" % req.get("op"))
        res = op(req) or {}
    except Said as e:
        res = {"error": e.desc}
    except Exception as e:  # every error is an answer
        res = {"error": describe(e, conn_of(req))}
    # What pika left in its buffer goes out now, not with the next request
    # (its basic_get on a closed channel writes the method, then raises
    # before it flushes): the broker sees each request's frames alone.
    flush(conn_of(req))
    res["id"] = req.get("id")
    out(res)


def flush(conn):
    if conn is not None and conn.is_open:
        try:
            conn.process_data_events(0)
        except Exception:
            pass  # its close callback has said why


def pump():
    """Has pika read every open connection, which calls back what came."""
    for conn in list(conns.values()):
        flush(conn)


def main():
    out({"event": "hello", "library": "pika " + pika.__version__})
    fd = sys.stdin.fileno()
    buf = b""
    while True:
        ready, _, _ = select.select([fd], [], [], 0.005)
        if not ready:
            pump()
            continue
        data = os.read(fd, 1 << 16)
        if not data:
            return
        buf += data
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                serve(json.loads(line))


if __name__ == "__main__":
    main()
