// broker.Broker's connections through amqplib 0.10 (NODE_PATH to
// examples/node/amqp-locks/node_modules), for the wire differential
// (adapters/served/amqpserve, clients_test.go).
//
// It reads one JSON request a line on stdin and answers each on stdout
// with the request's id and its result, or the error as amqplib gave it,
// one request at a time, in the order they came. Every
// asynchronous event amqplib reports (a connection or a channel closed, a
// message returned, a delivery, a consumer the broker cancelled) is
// written as it comes. The requests (op and fields; the answer's fields
// after the arrow):
//
//   dial url name heartbeat (s; 0 the broker's)          -> conn
//   channel conn                                          -> chan
//   confirm chan
//   declare chan queue passive durable exclusive auto_delete args
//                                    -> queue messages consumers
//   delete chan queue if_unused if_empty                  -> count
//   purge chan queue                                      -> count
//   bind chan queue exchange key
//   publish chan exchange key mandatory immediate persistent body (base64)
//                                    -> acked returned
//   get chan queue                                        -> got
//   consume chan queue exclusive                          -> tag
//   close_channel chan
//   close conn
//
// An error is {kind, class, code, text, scope}: kind "broker" (the broker
// closed the channel or the connection: its reply code and text), "closed"
// (used after it closed), "lost" (the socket went without an AMQP close),
// "refused" (no broker at the address), "other" (anything else, by its
// class and text); scope "channel" or "connection". It writes
// {"event": "hello", "library": "amqplib <version>"} first.
'use strict';

const readline = require('readline');
const amqp = require('amqplib');
const { ConfirmChannel } = require('amqplib/lib/channel_model');
const defs = require('amqplib/lib/defs');
const version = require('amqplib/package.json').version;

const conns = new Map(); // id -> {model, closed}
const chans = new Map(); // id -> {ch, conn, closed, returned, error}
let ids = 0;

function out(obj) {
  process.stdout.write(JSON.stringify(obj) + '\n');
}

// describe is the error e as the Go side takes it (see the top).
function describe(e, conn) {
  const err = (kind, code, text, scope) => ({
    kind, class: (e && e.constructor && e.constructor.name) || typeof e, code, text: String(text), scope,
  });
  if (e && e.fields && typeof e.fields.replyCode === 'number') {
    // amqplib's get rejects with the broker's channel.close frame itself.
    return { kind: 'broker', class: 'ChannelClose frame', code: e.fields.replyCode, text: String(e.fields.replyText), scope: 'channel' };
  }
  const msg = (e && e.message) || String(e);
  if (e && typeof e.code === 'number') {
    // A close the broker sent: "Operation failed: ...", "Channel closed by
    // server: ..." or "Connection closed: ...".
    const scope = msg.startsWith('Connection closed') ? 'connection' : 'channel';
    return err('broker', e.code, msg, scope);
  }
  if (e && e.code === 'ECONNREFUSED') {
    return err('refused', 0, msg, 'connection');
  }
  if (e && (typeof e.code === 'string' || msg === 'Unexpected close' || msg.startsWith('Heartbeat timeout'))) {
    return err('lost', 501, msg, 'connection');
  }
  if (e instanceof amqp.IllegalOperationError || msg === 'Channel ended, no reply will be forthcoming' || msg === 'channel closed') {
    const scope = conn && conn.closed ? 'connection' : 'channel';
    return err('closed', 504, msg, scope);
  }
  return err('other', 0, msg, '');
}

async function dial(req) {
  const u = new URL(req.url);
  const hb = req.heartbeat || 0;
  if (hb < 0) {
    throw new Error('amqplib cannot turn heartbeats off: it takes the broker\'s when it proposes 0');
  }
  u.searchParams.set('heartbeat', String(Math.ceil(hb)));
  const opts = req.name ? { clientProperties: { connection_name: req.name } } : {};
  const model = await amqp.connect(u.toString(), opts);
  const id = ++ids;
  const conn = { model, closed: false };
  conns.set(id, conn);
  model.on('error', () => {}); // 'close' says why
  model.on('close', (e) => {
    conn.closed = true;
    out({ event: 'conn-closed', conn: id, error: e ? describe(e, conn) : describe(new amqp.IllegalOperationError('Connection closed (by client)'), conn) });
  });
  return { conn: id };
}

async function channel(req) {
  const conn = conns.get(req.conn);
  // A ConfirmChannel opened without confirm.select, which confirm sends:
  // broker.Channel puts a channel in confirm mode as a step of its own.
  const ch = new ConfirmChannel(conn.model.connection);
  await ch.open();
  const id = ++ids;
  const c = { ch, conn, closed: false, returned: false, error: null };
  chans.set(id, c);
  ch.on('error', (e) => { c.error = e; });
  ch.on('close', () => {
    c.closed = true;
    out({ event: 'chan-closed', chan: id, error: describe(c.error || new amqp.IllegalOperationError('Channel closed'), conn) });
  });
  ch.on('return', (m) => {
    c.returned = true;
    out({ event: 'return', chan: id, code: m.fields.replyCode, text: m.fields.replyText });
  });
  ch.on('cancel', (f) => out({ event: 'cancelled', chan: id, tag: f.consumerTag }));
  return { chan: id };
}

// publish waits for the publish's confirm: acked for basic.ack, returned
// if a basic.return came before it.
function publish(c, req) {
  if (req.immediate) {
    throw new Error('amqplib 0.10 cannot publish with immediate set');
  }
  c.returned = false;
  return new Promise((resolve, reject) => {
    let settled = false;
    const body = Buffer.from(req.body || '', 'base64');
    const opts = { mandatory: !!req.mandatory, persistent: !!req.persistent };
    try {
      c.ch.publish(req.exchange || '', req.key || '', body, opts, (err) => {
        if (settled) return;
        settled = true;
        if (err && err.message === 'message nacked') {
          resolve({ acked: false, returned: c.returned });
        } else if (err) {
          // The channel closed before the confirm: why it closed.
          reject(c.error || err);
        } else {
          resolve({ acked: true, returned: c.returned });
        }
      });
    } catch (e) {
      settled = true;
      reject(e);
    }
  });
}

const chanOps = {
  confirm: (c) => c.ch.rpc(defs.ConfirmSelect, { nowait: false }, defs.ConfirmSelectOk).then(() => ({})),
  declare: async (c, req) => {
    const q = req.passive
      ? await c.ch.checkQueue(req.queue || '')
      : await c.ch.assertQueue(req.queue || '', {
        durable: !!req.durable, exclusive: !!req.exclusive, autoDelete: !!req.auto_delete, arguments: req.args || {},
      });
    return { queue: q.queue, messages: q.messageCount, consumers: q.consumerCount };
  },
  delete: async (c, req) => ({ count: (await c.ch.deleteQueue(req.queue, { ifUnused: !!req.if_unused, ifEmpty: !!req.if_empty })).messageCount }),
  purge: async (c, req) => ({ count: (await c.ch.purgeQueue(req.queue)).messageCount }),
  bind: (c, req) => c.ch.bindQueue(req.queue, req.exchange || '', req.key || '').then(() => ({})),
  publish,
  get: async (c, req) => ({ got: (await c.ch.get(req.queue, { noAck: false })) !== false }),
  consume: async (c, req, id) => {
    const ok = await c.ch.consume(req.queue, (m) => {
      // Never acknowledged: it stays unacked until the channel closes.
      if (m) out({ event: 'deliver', chan: id, tag: m.fields.consumerTag, delivery_tag: m.fields.deliveryTag });
    }, { noAck: false, exclusive: !!req.exclusive });
    return { tag: ok.consumerTag };
  },
  close_channel: (c) => c.ch.close().then(() => ({})),
};

async function serve(req) {
  const op = req.op;
  if (op === 'dial') return dial(req);
  if (op === 'channel') return channel(req);
  if (op === 'close') {
    await conns.get(req.conn).model.close();
    return {};
  }
  const f = chanOps[op];
  if (!f) throw new Error(`no such request: ${op}`);
  const c = chans.get(req.chan);
  return f(c, req, req.chan);
}

function connOf(req) {
  if (req.conn !== undefined) return conns.get(req.conn);
  const c = chans.get(req.chan);
  return c && c.conn;
}

// answer serves req and writes its answer, once the requests before it
// are answered: one at a time, in the order they came, as pika's helper.
let queue = Promise.resolve();
function answer(req) {
  queue = queue.then(() => serve(req)).then(
    (res) => out(Object.assign({}, res, { id: req.id })),
    (e) => out({ id: req.id, error: describe(e, connOf(req)) }));
}

out({ event: 'hello', library: `amqplib ${version}` });
const rl = readline.createInterface({ input: process.stdin });
rl.on('line', (line) => {
  if (line.trim()) answer(JSON.parse(line));
});
rl.on('close', () => process.exit(0));
