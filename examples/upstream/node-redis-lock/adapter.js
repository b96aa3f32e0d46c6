'use strict';
// Serves lockprover's process protocol for Redlock (docs/protocol.md,
// "Redlock") with npm redis-lock 1.0.0 (errorception/redis-lock) on a
// node-redis 4.7.1 client, called through its public API and unchanged:
// one process is one lockprover client of one key.
//
//   (cd examples/upstream/node-redis-lock && npm ci)
//   lockprover validate-impl --kind redlock --impl 'node examples/upstream/node-redis-lock/adapter.js'
//   lockprover prove --target redis --kind redlock --servers 1 --impl 'node examples/upstream/node-redis-lock/adapter.js'
//
// redis-lock is a single-instance lock: the adapter connects to the first
// address of init's addrs only (every client of a plan does); prove it
// with --servers 1. The client is node-redis's createClient with the
// address only (its defaults otherwise), as the README shows.
//
// - acquire: redisLock(client, retryDelay)(name, ttl_ms). The library
//   never gives up: a SET NX that fails, for whatever reason, is tried
//   again after retryDelay, forever. The protocol's acquire never waits,
//   so the adapter passes the largest delay a Node timer takes
//   (2147483647 ms, 24.8 days: the retry never comes in a run) and, after
//   calling lock(), sends a PING on the same connection: node-redis
//   answers in order, so once the PING is answered (and the event loop
//   has turned), the SET's answer was seen. The lock granted is
//   acquire_ok, its token one the adapter makes (the library's value,
//   Date.now() + ttl + 1, is not exposed: the library has no owner
//   token); not granted, with no client 'error' event and a PING
//   answered, is acquire_fail held; anything else is an error without
//   definite (unknown outcome: the library swallows the SET's error).
// - refresh: redis-lock has none: a definite error unsupported.
// - release: the function lock() resolved with, called as the library
//   gives it (as often as lockprover asks: a second call is the library's
//   to answer). It DELs the key, with no owner check, while the lock's
//   own deadline by the local clock has not passed, and does nothing
//   after: DEL's 1 is release_ok, its 0 or nothing release_fail expired;
//   an error is an unknown outcome.
// - No validity_ms (the library claims none), no fence.
//
// Logs go to stderr; stdout carries only replies.

const crypto = require('crypto');
const readline = require('readline');
const { createClient } = require('redis');
const redisLock = require('redis-lock');

const MAX_TIMER = 2147483647;

let client = null;
let name = null;
let lock = null;
let who = '?';
let errors = 0; // client 'error' events so far
const grants = new Map(); // token -> the release function lock() gave

function refuse(code, text) {
	return { type: 'error', code, text, definite: true };
}

function unknown(op, err) {
	process.stderr.write(`${who}: ${op}: ${err}\n`);
	return { type: 'error', code: 'redis', text: String(err) };
}

async function init(req) {
	if (client) return refuse('bad request', 'init was already received');
	who = String(req.client || '?');
	if (req.lock !== 'redlock') return refuse('unsupported', `lock kind ${JSON.stringify(req.lock)}: this adapter serves redlock`);
	if (!req.name || !Array.isArray(req.addrs) || !req.addrs[0]) return refuse('bad request', 'init needs "name" and "addrs"');
	const addr = String(req.addrs[0]);
	const i = addr.lastIndexOf(':');
	client = createClient({ socket: { host: addr.slice(0, i), port: Number(addr.slice(i + 1)) } });
	client.on('error', (err) => {
		errors++;
		process.stderr.write(`${who}: client error: ${err}\n`);
	});
	name = req.name;
	lock = redisLock(client, MAX_TIMER);
	try {
		await client.connect();
	} catch (err) {
		return unknown('init', err);
	}
	return { type: 'init_ok' };
}

async function acquire(req) {
	const before = errors;
	let release = null;
	lock(name, req.ttl_ms).then((fn) => { release = fn; });
	try {
		await client.ping();
	} catch (err) {
		return unknown('acquire', `the PING after the SET: ${err}`);
	}
	await new Promise((resolve) => setImmediate(resolve));
	if (release) {
		const token = crypto.randomBytes(16).toString('hex');
		grants.set(token, release);
		return { type: 'acquire_ok', token };
	}
	if (errors !== before) return unknown('acquire', 'a client error during the SET (the library retries it in 24.8 days)');
	return { type: 'acquire_fail', reason: 'held' };
}

async function releaseOp(req) {
	const release = grants.get(req.token);
	if (!release) return { type: 'release_fail', reason: 'expired' };
	let n;
	try {
		n = await release();
	} catch (err) {
		return unknown('release', err);
	}
	return n === 1 ? { type: 'release_ok' } : { type: 'release_fail', reason: 'expired' };
}

async function handle(req) {
	const t = req.type;
	if (t === 'init') return init(req);
	if (t !== 'acquire' && t !== 'refresh' && t !== 'release') return refuse('unsupported', `request type ${JSON.stringify(t)}`);
	if (!client) return refuse('not initialised', 'the first request must be init');
	if (t !== 'acquire' && !(typeof req.token === 'string' && req.token)) return refuse('bad request', '"token" must be a non-empty string');
	if (t !== 'release' && !(Number.isInteger(req.ttl_ms) && req.ttl_ms > 0)) return refuse('bad request', '"ttl_ms" must be a positive integer');
	if (t === 'acquire') return acquire(req);
	if (t === 'refresh') return refuse('unsupported', 'redis-lock has no refresh');
	return releaseOp(req);
}

async function main() {
	process.stderr.write('redis-lock adapter: redis-lock 1.0.0, node-redis 4.7.1\n');
	const rl = readline.createInterface({ input: process.stdin, terminal: false });
	for await (const line of rl) {
		let req;
		try {
			req = JSON.parse(line);
		} catch (err) {
			process.stderr.write(`${who}: a request that is not JSON: ${line}\n`);
			continue;
		}
		if (req === null || typeof req !== 'object' || !Number.isInteger(req.id)) {
			process.stderr.write(`${who}: a request without an id: ${line}\n`);
			continue;
		}
		let reply;
		try {
			reply = await handle(req);
		} catch (err) {
			reply = unknown(req.type, err);
		}
		reply.id = req.id;
		process.stdout.write(JSON.stringify(reply) + '\n');
	}
	// The library's retry timers (24.8 days) would keep the process alive.
	process.exit(0);
}

main();
