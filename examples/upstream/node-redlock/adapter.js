'use strict';
// Serves lockprover's process protocol for Redlock (docs/protocol.md,
// "Redlock") with npm redlock (mike-marcacci/node-redlock), called through
// its public API and unchanged: one process is one lockprover client of
// one key.
//
//   (cd examples/upstream/node-redlock && npm ci)
//   lockprover validate-impl --kind redlock --impl 'node examples/upstream/node-redlock/adapter.js'
//
// - init: one ioredis client per address of init's addrs, with ioredis's
//   defaults (host and port only), and one Redlock over them with
//   retryCount 0 (one attempt: the protocol's acquire never waits) and the
//   library's other defaults (driftFactor 0.01).
// - acquire: redlock.lock(name, ttl_ms). The token is the lock's value;
//   validity_ms is lock.expiration less Date.now() (the library's clock),
//   elapsed_ms the time since the adapter's own start of the operation
//   (process.hrtime, read just before calling the library, which reads
//   its own clock a few microseconds later, or milliseconds on a loaded
//   machine), and started_ms when the library made the lock's value
//   (its _random, which lock() calls right before it reads its clock,
//   Date.now(), for the start it counts the validity from), less a
//   millisecond (Date.now()'s resolution: the start it counts from may
//   be that much before the moment it read it). Wrapping _random on the
//   adapter's instance, to note the time, is the one place the adapter
//   reaches past the library's public API. fence: none.
// - refresh: lock.extend(ttl_ms) on the Lock that token names; release:
//   lock.unlock().
// - The library fails every operation with one LockError, whatever the
//   cause, and reports a server's error only by its 'clientError' event.
//   A LockError with no clientError during the operation is the servers'
//   refusal: acquire_fail held (the README: treat a failure "as the
//   resource being "locked" or (more correctly) "unavailable""),
//   refresh_fail or release_fail expired. The same LockError comes when a
//   majority set the key too late (no validity left), which the library
//   then deletes: where ttl - drift has passed since the adapter's start,
//   an acquire's LockError is a definite error "no validity" (no key is
//   left, but the lock may not be held), a refresh's an unknown outcome.
//   A LockError after a clientError, or any other exception, is an error
//   without definite (unknown outcome).
// - A refresh or release of a token this process never granted answers
//   expired without calling the library (there is no Lock for it).
//
// Flags: --command-timeout MS sets ioredis's commandTimeout (none by
// default, as in the README's configuration): the library has no timeout
// of its own, so without it an operation waits for a partitioned or paused
// server for as long as the fault lasts.
//
// Logs go to stderr; stdout carries only replies.

const crypto = require('crypto');
const Redis = require('ioredis');
const serve = require('../internal/serve/serve.js');
const Redlock = require('redlock');

const args = process.argv.slice(2);
let commandTimeout;
for (let i = 0; i < args.length; i++) {
	if (args[i] === '--command-timeout' && i + 1 < args.length) {
		commandTimeout = Number(args[++i]);
	} else {
		process.stderr.write(`usage: node adapter.js [--command-timeout MS]\n`);
		process.exit(2);
	}
}

// Nothing but replies on stdout.
console.log = (...a) => console.error(...a);

const versions = `redlock ${require('redlock/package.json').version}, ioredis ${require('ioredis/package.json').version}`;
let client = '';
let name = null;
let clients = [];
let redlock = null;
let clientErrors = 0;
let libStart = null; // process.hrtime() as the library made the last value
const locks = new Map(); // token -> Lock granted by this process

function log(msg) {
	process.stderr.write(`${client}: ${msg}\n`);
}

const refuse = serve.refuse;

function since(start) {
	const d = process.hrtime(start);
	return d[0] * 1e3 + d[1] / 1e6;
}

// drift is the library's: Math.round(driftFactor * ttl) + 2.
function drift(ttl) {
	return Math.round(0.01 * ttl) + 2;
}

// granted adds the validity and elapsed time to a grant's reply. The
// library's own start, reconstructed from lock.expiration = its start +
// ttl - drift, is logged where it came more than a millisecond after the
// adapter's (wallStart, Date.now() read with start): a claim that reaches
// past lockprover's bound by that much is the adaptation's.
function granted(m, lock, start, wallStart, ttl) {
	const now = Date.now();
	m.validity_ms = Math.max(lock.expiration - now, 0);
	m.elapsed_ms = since(start);
	if (m.type === 'acquire_ok' && libStart !== null) {
		const s = (libStart[0] - start[0]) * 1e3 + (libStart[1] - start[1]) / 1e6 - 1;
		if (s > 0 && s <= m.elapsed_ms) m.started_ms = s;
	}
	const gap = lock.expiration - ttl + drift(ttl) - wallStart;
	if (gap > 1) log(`${m.type}: the library's own start came ${gap} ms after the adapter's`);
	return m;
}

// failed maps an operation's failure: a LockError with no clientError
// since errorsBefore is the servers' refusal (refusal: null for none);
// anything else is unknown.
function failed(op, err, errorsBefore, refusal) {
	if (refusal && err instanceof Redlock.LockError && clientErrors === errorsBefore) {
		return refusal;
	}
	log(`${op}: ${err && err.message} (${clientErrors - errorsBefore} client errors)`);
	return { type: 'error', code: 'redlock', text: String(err && err.message) };
}

function init(req) {
	if (redlock) return refuse('bad request', 'init was already received');
	client = typeof req.client === 'string' ? req.client : '';
	if (req.lock !== 'redlock') return refuse('unsupported', `lock kind ${JSON.stringify(req.lock)}: this adapter serves redlock`);
	if (typeof req.name !== 'string' || req.name === '' || !Array.isArray(req.addrs) || req.addrs.length === 0) {
		return refuse('bad request', 'init needs "name" and "addrs"');
	}
	name = req.name;
	clients = req.addrs.map((a) => {
		const i = a.lastIndexOf(':');
		const o = { host: a.slice(0, i), port: Number(a.slice(i + 1)) };
		if (commandTimeout !== undefined) o.commandTimeout = commandTimeout;
		const c = new Redis(o);
		c.on('error', (e) => log(`ioredis ${a}: ${e.message}`));
		return c;
	});
	redlock = new Redlock(clients, { retryCount: 0 });
	const random = redlock._random.bind(redlock);
	redlock._random = () => {
		const v = random();
		libStart = process.hrtime();
		return v;
	};
	// The library reads its clock after making the lock's value
	// (crypto.randomBytes), whose first call in a process seeds the random
	// generator: a few milliseconds that would lie between the adapter's
	// start and the library's, and count against the validity claimed.
	// Seeded here, at init.
	crypto.randomBytes(16);
	redlock.on('clientError', (e) => {
		clientErrors++;
		log(`clientError: ${e && e.message}`);
	});
	log(`${versions}, command timeout ${commandTimeout === undefined ? 'none' : commandTimeout + ' ms'}`);
	return { type: 'init_ok' };
}

async function handle(req) {
	if (req.type === 'init') return init(req);
	const refusal = serve.lease(req, redlock !== null);
	if (refusal) return refusal;
	const start = process.hrtime();
	const wallStart = Date.now();
	libStart = null;
	const before = clientErrors;
	switch (req.type) {
	case 'acquire':
		try {
			const lock = await redlock.lock(name, req.ttl_ms);
			locks.set(lock.value, lock);
			return granted({ type: 'acquire_ok', token: lock.value }, lock, start, wallStart, req.ttl_ms);
		} catch (e) {
			// The library's one LockError also means a majority set the key
			// too late (no validity left); it then deleted the keys, every
			// server answering. That cannot be the case while less than
			// ttl - drift has passed since the adapter's start (earlier than
			// the library's): the servers refused, the lock is held. Past
			// it, the acquire certainly left no key, but may not have met a
			// holder: a definite error.
			if (since(start) >= req.ttl_ms - drift(req.ttl_ms)) {
				return failed('acquire', e, before, refuse('no validity', `${e.message}, after ${since(start).toFixed(1)} ms (ttl ${req.ttl_ms} ms): held, or no validity left`));
			}
			return failed('acquire', e, before, { type: 'acquire_fail', reason: 'held' });
		}
	case 'refresh': {
		const lock = locks.get(req.token);
		if (!lock) return { type: 'refresh_fail', reason: 'expired' };
		try {
			const l = await lock.extend(req.ttl_ms);
			return granted({ type: 'refresh_ok' }, l, start, wallStart, req.ttl_ms);
		} catch (e) {
			// Past ttl - drift, the extension may have been made on a
			// majority too late (and then deleted by the library): unknown.
			if (since(start) >= req.ttl_ms - drift(req.ttl_ms)) {
				return failed('refresh', e, before, null);
			}
			return failed('refresh', e, before, { type: 'refresh_fail', reason: 'expired' });
		}
	}
	default: {
		const lock = locks.get(req.token);
		if (!lock) return { type: 'release_fail', reason: 'expired' };
		try {
			await lock.unlock();
			return { type: 'release_ok' };
		} catch (e) {
			return failed('release', e, before, { type: 'release_fail', reason: 'expired' });
		}
	}
	}
}

serve.lines(handle, log, () => {
	for (const c of clients) c.disconnect();
});
