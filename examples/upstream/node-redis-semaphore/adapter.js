'use strict';
// Serves lockprover's process protocol for Redlock (docs/protocol.md,
// "Redlock") with npm redis-semaphore (swarthy/redis-semaphore), called
// through its public API and unchanged: one process is one lockprover
// client of one key.
//
//   (cd examples/upstream/node-redis-semaphore && npm ci)
//   lockprover validate-impl --kind redlock --impl 'node examples/upstream/node-redis-semaphore/adapter.js'
//
// --variant picks the class (default mutex):
//   mutex              Mutex(client, name): SET NX PX on the first server of
//                      init's addrs (the Redis server's clock expires it)
//   semaphore          Semaphore(client, name, limit): a sorted set on the
//                      first server, members expired by the CLIENT's
//                      Date.now()
//   redlock-mutex      RedlockMutex(clients, name) over every server
//   redlock-semaphore  RedlockSemaphore(clients, name, limit) over every
//                      server
// limit is init's (present when the plan's is above 1: prove --limit N),
// else 1; the mutexes refuse a limit above 1 (a definite unsupported).
//
// - init: one ioredis client per address (ioredis's defaults: host and
//   port, plus commandTimeout with --command-timeout). Only the variant's
//   servers are connected.
// - acquire: a new instance with lockTimeout ttl_ms, acquireAttemptsLimit
//   1 (one attempt: the protocol's acquire never waits), retryInterval 0
//   and refreshInterval 0 (the library's own refresh timer off: lockprover
//   asks for every refresh), then tryAcquire(). The token is the
//   instance's identifier (crypto.randomUUID()). true is acquire_ok (no
//   validity, no fence: the library claims none); false is acquire_fail
//   held, unless a command of the attempt was rejected (below).
// - refresh: what the README shows for "acquire in scheduler, refresh and
//   release in handler": a new instance with identifier token,
//   acquiredExternally true and lockTimeout ttl_ms, then tryAcquire(),
//   which runs the library's refresh (owner-checked, Lua) instead of an
//   acquire. true is refresh_ok, false refresh_fail expired. That
//   instance then stands for the lease (it is the one released).
// - release: the library's release() resolves with nothing whether or not
//   the lease was still held (its README: "if lock is no longer belongs to
//   this mutex, .release() will have no effect"); the only record it
//   keeps is the instance's isAcquired. So: isAcquired false (never
//   granted here, released already, or its last refresh failed) is
//   release_fail expired without a command (the library sends none
//   either); otherwise release() and release_ok. A release after the lease
//   expired therefore answers release_ok: what the library tells its
//   caller (no error), which lockprover's no-revival reads as a claim.
// - Errors. The single-server classes let ioredis's rejections out: an
//   error without definite (unknown outcome). The Redlock classes catch
//   every server's rejection and count it as that server's refusal; the
//   adapter hands them ioredis clients whose command promises it watches
//   (a Proxy that only counts rejections, NOSCRIPT aside: the library
//   answers that one itself with an EVAL), and an attempt during which any
//   was rejected is an unknown outcome rather than held or expired.
//
// Flags:
//   --variant V            the class above
//   --command-timeout MS   ioredis's commandTimeout (none by default, as in
//                          the README: without it a command to a paused or
//                          partitioned server waits as long as the fault)
//   --reconnect-unknown    an acquire refused after ioredis lost a connection
//                          during it is an unknown outcome, not held: ioredis
//                          sends a command whose reply was lost again
//                          (autoResendUnfulfilledCommands, on by default),
//                          and the second SET NX (or script) meets the
//                          first's key and answers no. The library does not
//                          tell; the adapter watches ioredis's 'close' events
//                          (what a caller could do). Without the flag the
//                          refusal is held, as the library says
//   --clock-ahead C=MS     the process serving client C (init's "client")
//                          runs with Date.now() MS milliseconds ahead of
//                          the machine's clock, for the library and
//                          everything else in it (repeatable). lockprover
//                          cannot move a process's clock (protocol.md,
//                          "Redlock": "Nothing is done to your process's
//                          clock"), so this fault is the adapter's: it is
//                          logged on stderr, and the history does not
//                          record it (no excuse is drawn from it).
//
// Logs go to stderr; stdout carries only replies.

const Redis = require('ioredis');
const serve = require('../internal/serve/serve.js');
const sem = require('redis-semaphore');

const variants = {
	mutex: { cls: sem.Mutex, redlock: false, semaphore: false },
	semaphore: { cls: sem.Semaphore, redlock: false, semaphore: true },
	'redlock-mutex': { cls: sem.RedlockMutex, redlock: true, semaphore: false },
	'redlock-semaphore': { cls: sem.RedlockSemaphore, redlock: true, semaphore: true },
};

function usage(msg) {
	process.stderr.write(`${msg}\nusage: node adapter.js [--variant ${Object.keys(variants).join('|')}] [--command-timeout MS] [--reconnect-unknown] [--clock-ahead CLIENT=MS]...\n`);
	process.exit(2);
}

const args = process.argv.slice(2);
let variantName = 'mutex';
let commandTimeout;
let reconnectUnknown = false;
const clockAhead = new Map();
for (let i = 0; i < args.length; i++) {
	const a = args[i];
	if (a === '--reconnect-unknown') {
		reconnectUnknown = true;
		continue;
	}
	if (i + 1 >= args.length) usage(`${a}: a value is missing`);
	const v = args[++i];
	if (a === '--variant') {
		if (!(v in variants)) usage(`--variant ${v}: not one of ${Object.keys(variants).join(', ')}`);
		variantName = v;
	} else if (a === '--command-timeout') {
		commandTimeout = Number(v);
		if (!(Number.isInteger(commandTimeout) && commandTimeout > 0)) usage(`--command-timeout ${v}: not a positive whole number of milliseconds`);
	} else if (a === '--clock-ahead') {
		const m = /^([^=]+)=(-?\d+)$/.exec(v);
		if (!m) usage(`--clock-ahead ${v}: want CLIENT=MS, e.g. c2=600`);
		clockAhead.set(m[1], Number(m[2]));
	} else {
		usage(`${a}: unknown flag`);
	}
}
const variant = variants[variantName];

// Nothing but replies on stdout.
console.log = (...a) => console.error(...a);

const versions = `redis-semaphore ${require('redis-semaphore/package.json').version}, ioredis ${require('ioredis/package.json').version}`;
let client = '';
let name = null;
let limit = 1;
let clients = [];
let closes = 0; // connections of the clients that ioredis saw close
let rejections = 0; // command promises of the watched clients that were rejected
const locks = new Map(); // token -> the instance that stands for its lease

function log(msg) {
	process.stderr.write(`${client}: ${msg}\n`);
}

const refuse = serve.refuse;

// watched wraps an ioredis client so that every rejected command promise
// is counted; the library sees the client's own methods and results.
function watched(c) {
	return new Proxy(c, {
		get(target, prop) {
			const v = Reflect.get(target, prop, target);
			if (typeof v !== 'function' || !['set', 'eval', 'evalsha', 'zrem', 'get'].includes(prop)) {
				return typeof v === 'function' ? v.bind(target) : v;
			}
			return (...a) => {
				const p = v.apply(target, a);
				p.catch((e) => {
					// The library answers NOSCRIPT itself, with an EVAL.
					if (String(e && e.message).includes('NOSCRIPT')) return;
					rejections++;
					log(`${prop}: ${e && e.message}`);
				});
				return p;
			};
		},
	});
}

function init(req) {
	if (name !== null) return refuse('bad request', 'init was already received');
	client = typeof req.client === 'string' ? req.client : '';
	if (req.lock !== 'redlock') return refuse('unsupported', `lock kind ${JSON.stringify(req.lock)}: this adapter serves redlock`);
	if (typeof req.name !== 'string' || req.name === '' || !Array.isArray(req.addrs) || req.addrs.length === 0) {
		return refuse('bad request', 'init needs "name" and "addrs"');
	}
	if (req.limit !== undefined && !(Number.isInteger(req.limit) && req.limit >= 1)) return refuse('bad request', '"limit" must be a positive integer');
	if (req.limit > 1 && !variant.semaphore) return refuse('unsupported', `limit ${req.limit}: ${variantName} is a mutex`);
	if (req.limit !== undefined) limit = req.limit;
	name = req.name;
	const addrs = variant.redlock ? req.addrs : req.addrs.slice(0, 1);
	clients = addrs.map((a) => {
		const i = a.lastIndexOf(':');
		const o = { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
		if (commandTimeout !== undefined) o.commandTimeout = commandTimeout;
		const c = new Redis(o);
		c.on('error', (e) => log(`ioredis ${a}: ${e.message}`));
		c.on('close', () => closes++);
		return c;
	});
	const ahead = clockAhead.get(client);
	if (ahead !== undefined) {
		const real = Date.now;
		Date.now = () => real() + ahead;
		log(`Date.now() runs ${ahead} ms ahead of the machine's clock in this process (--clock-ahead; not recorded in the history)`);
	}
	log(`${versions}, ${variantName}${variant.semaphore ? ` (limit ${limit})` : ''} on ${addrs.join(' ')}, command timeout ${commandTimeout === undefined ? 'none' : commandTimeout + ' ms'}${reconnectUnknown ? ', reconnect unknown' : ''}`);
	return { type: 'init_ok' };
}

// instance makes the variant's lock on the plan's key with options.
function instance(options) {
	const o = Object.assign({ acquireAttemptsLimit: 1, retryInterval: 0, refreshInterval: 0 }, options);
	const target = variant.redlock ? clients.map(watched) : watched(clients[0]);
	return variant.semaphore ? new variant.cls(target, name, limit, o) : new variant.cls(target, name, o);
}

// unknown is the reply to an operation whose outcome the adapter cannot
// tell.
function unknown(op, e) {
	log(`${op}: ${e && e.message}`);
	return { type: 'error', code: 'redis', text: String(e && e.message) };
}

async function handle(req) {
	if (req.type === 'init') return init(req);
	const refusal = serve.lease(req, name !== null);
	if (refusal) return refusal;
	const before = rejections;
	const closesBefore = closes;
	switch (req.type) {
	case 'acquire': {
		const lock = instance({ lockTimeout: req.ttl_ms });
		let ok;
		try {
			ok = await lock.tryAcquire();
		} catch (e) {
			return unknown('acquire', e);
		}
		if (ok) {
			locks.set(lock.identifier, lock);
			return { type: 'acquire_ok', token: lock.identifier };
		}
		if (rejections !== before) return unknown('acquire', new Error(`refused, ${rejections - before} commands rejected`));
		if (reconnectUnknown && closes !== closesBefore) return unknown('acquire', new Error('refused after a connection was lost (the command may have been sent twice)'));
		return { type: 'acquire_fail', reason: 'held' };
	}
	case 'refresh': {
		const lock = instance({ lockTimeout: req.ttl_ms, identifier: req.token, acquiredExternally: true });
		let ok;
		try {
			ok = await lock.tryAcquire();
		} catch (e) {
			return unknown('refresh', e);
		}
		locks.set(req.token, lock);
		if (ok) return { type: 'refresh_ok' };
		if (rejections !== before) return unknown('refresh', new Error(`refused, ${rejections - before} commands rejected`));
		return { type: 'refresh_fail', reason: 'expired' };
	}
	default: {
		const lock = locks.get(req.token);
		if (!lock || !lock.isAcquired) return { type: 'release_fail', reason: 'expired' };
		try {
			await lock.release();
		} catch (e) {
			return unknown('release', e);
		}
		if (rejections !== before) return unknown('release', new Error(`${rejections - before} commands rejected`));
		return { type: 'release_ok' };
	}
	}
}

serve.lines(handle, log, () => {
	for (const c of clients) c.disconnect();
});
