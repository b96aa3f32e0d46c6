'use strict';
// lockprover process-protocol server for amqp-locks on Node.js and amqplib
// (docs/protocol-amqp-locks.md), serving amqp_locks.js as
// examples/python/lockprover_impl.py serves amqp_locks.py, but for when it
// connects again (below).
//
//   (cd examples/node/amqp-locks && npm ci)
//   lockprover validate-impl --impl 'node examples/node/amqp-locks/lockprover_impl.js'
//   lockprover prove --target rabbitmq --impl 'node examples/node/amqp-locks/lockprover_impl.js'
//
// lockprover starts one of these per client or admin of a run. It reads one
// JSON request per line on stdin and writes one JSON reply per line on
// stdout; logs go to stderr. The first request is init, which connects to
// the broker (trying for a few seconds, then answering init_ok anyway and
// leaving it to the first operation that needs the broker). A connection
// lost later is reported by the operation that meets it (an error, or
// held:false for a verify). A new connection, which holds nothing, is
// opened before the reply of any operation but a verify that finds the
// connection lost, and else by the next acquire or admin operation. Never
// while idle nor after a reply: lockprover charges an operation with the
// AMQP methods its process sent between the request and the reply, and a
// handshake begun while idle would be charged, in part, to a verify that
// came meanwhile (cheap-verify: a verify sends one publish and nothing
// else). At EOF on stdin (or on SIGTERM) the server closes its connection
// and exits 0.
//
// init_ok declares "abrupt_close": "heartbeat": amqplib ends a socket
// without a connection.close only when its heartbeat deadline passes (two
// intervals with nothing read); everywhere else it closes politely, and
// so does this server when it exits.
//
// --defect NAME seeds one defect, for showing that lockprover catches it:
//
//   verify-from-cache  verify answers from memory, the slot the last
//                      acquire_ok gave, without asking the broker (the
//                      reference's mutant of that name): it says held
//                      after the slot was removed, or after the connection
//                      that held it was lost.
//
// With a defect, init_ok declares nothing, as serve-reference's mutants do.

const readline = require('readline');
const al = require('./amqp_locks.js');

// CONNECT_TIMEOUT bounds a connection attempt (TCP connect and AMQP
// handshake), well within lockprover's 30 s per operation. INIT_PATIENCE
// is how long init keeps trying to connect (lockprover gives init 10 s),
// RETRY_PAUSE the pause between attempts.
const CONNECT_TIMEOUT = 5000;
const INIT_PATIENCE = 6000;
const RETRY_PAUSE = 200;

// The reasons an acquire_fail may carry; other definite failures are errors.
const ACQUIRE_FAIL_REASONS = new Set(['full', 'absent', 'unavailable', 'contended', 'held']);

const DEFECTS = new Set(['verify-from-cache']);

// BadRequest: the request is malformed; answered with a definite error.
class BadRequest extends Error {}

let who = '-';
function log(msg) {
	process.stderr.write(`${new Date().toISOString()} ${who} ${msg}\n`);
}

// intField is req[field] as an integer of at least min (null: any).
function intField(req, field, min) {
	const v = req[field];
	if (!Number.isInteger(v) || (min !== null && v < min)) {
		throw new BadRequest(`${req.type} needs an integer ${JSON.stringify(field)}${min !== null ? ` >= ${min}` : ''}`);
	}
	return v;
}

// Server is one lockprover process: a client (or admin) of one lock.
class Server {
	constructor(defect) {
		this.defect = defect;
		this.init = null; // the init request
		this.client = null; // the current al.Client, once connected
		this.exitCode = null; // set when the server must stop after a reply
		this.cached = null; // verify-from-cache: the slot the last acquire_ok gave (0: a mutex)
	}

	// handle answers one request with one reply. An operation that lost
	// the connection connects again before it answers, so that the
	// connection is not counted against the next operation; a verify does
	// not, since lockprover judges what a verify sends: the next operation
	// that needs the broker connects.
	async handle(req) {
		const reply = await this.answer(req);
		if (req.type !== 'verify') await this.recover();
		return reply;
	}

	async answer(req) {
		const rid = req.id;
		let reply;
		try {
			if (req.type === 'init') {
				reply = await this.start(req);
			} else if (this.init === null) {
				throw new BadRequest('the first request must be init');
			} else {
				const handler = this.handlers().get(req.type);
				if (handler === undefined) {
					return { id: rid, type: 'error', code: 'unsupported', text: `unsupported request type ${JSON.stringify(req.type)}`, definite: true };
				}
				reply = await handler(req);
			}
		} catch (e) {
			reply = failure(req.type, rid, e);
		}
		return { id: rid, ...reply };
	}

	handlers() {
		if (this.init.lock === 'mutex') {
			return new Map([
				['acquire', () => this.mutexAcquire()], ['verify', () => this.mutexVerify()], ['release', () => this.mutexRelease()],
			]);
		}
		return new Map([
			['acquire', () => this.acquire()], ['verify', (r) => this.verify(r)], ['release', (r) => this.release(r)],
			['create', (r) => {
				const slots = intField(r, 'slots', 0);
				return this.admin((a) => a.create(slots), () => ({ type: 'create_ok' }));
			}],
			['change', (r) => {
				const delta = intField(r, 'delta', null);
				return this.admin((a) => a.change(delta), ([from, to]) => ({ type: 'change_ok', from, to }));
			}],
			['count', () => this.admin((a) => a.count(), (slots) => ({ type: 'count_ok', slots }))],
			['wait', (r) => {
				const slot = intField(r, 'slot', 1);
				return this.admin((a) => a.wait(slot), () => ({ type: 'wait_ok' }));
			}],
			['destroy', () => this.admin((a) => a.destroy(), (from) => ({ type: 'destroy_ok', from }))],
		]);
	}

	// --- connection -----------------------------------------------------

	async start(req) {
		if (this.init !== null) throw new BadRequest('init was already received');
		for (const field of ['client', 'name', 'url']) {
			if (typeof req[field] !== 'string') {
				this.exitCode = 1;
				throw new BadRequest(`init needs a string ${JSON.stringify(field)}`);
			}
		}
		if (req.lock !== 'semaphore' && req.lock !== 'mutex') {
			this.exitCode = 1;
			throw new BadRequest(`unknown lock kind ${JSON.stringify(req.lock)}`);
		}
		this.init = req;
		who = req.client;
		// A fault can strike during the handshake: try again for a while,
		// then answer anyway and leave it to the first operation that
		// needs the broker.
		const deadline = Date.now() + INIT_PATIENCE;
		while (this.client === null) {
			try {
				this.client = await this.connect(Math.min(CONNECT_TIMEOUT, Math.max(deadline - Date.now(), 1000)));
			} catch (e) {
				if (!(e instanceof al.ConnectionLost)) throw e;
				log(`init: ${e.message}`);
				if (Date.now() + RETRY_PAUSE >= deadline) break;
				await new Promise((resolve) => setTimeout(resolve, RETRY_PAUSE));
			}
		}
		return this.defect ? { type: 'init_ok' } : { type: 'init_ok', abrupt_close: 'heartbeat' };
	}

	async connect(timeout) {
		const ms = this.init.heartbeat_ms;
		// 0 (or none) proposes none: the broker's value applies. amqplib
		// counts whole seconds.
		const heartbeat = Number.isInteger(ms) && ms > 0 ? Math.ceil(ms / 1000) : undefined;
		log(`connecting (heartbeat ${heartbeat === undefined ? "the broker's" : `${heartbeat} s`})`);
		return al.Client.connect(this.init.url, {
			heartbeat, name: `lockprover ${this.init.client} ${this.init.name}`, connectTimeout: timeout, log,
		});
	}

	// connected is the client, connecting first if it has no connection;
	// it throws ConnectionLost if it cannot connect.
	async connected() {
		if (this.client !== null && !this.client.isOpen) this.client = null;
		if (this.client === null) this.client = await this.connect(CONNECT_TIMEOUT);
		return this.client;
	}

	// recover connects again after a connection loss, so that the next
	// operation finds a connection. One attempt per loss: if it fails, the
	// next operation that needs the broker tries again.
	async recover() {
		if (this.client === null || this.client.isOpen) return;
		try {
			await this.connected();
		} catch (e) {
			log(`connecting again: ${e.message}`);
		}
	}

	async close() {
		if (this.client !== null) await this.client.close();
	}

	// holder is the client for verify and release: they work on the
	// current client even when its connection is gone (a new connection
	// would hold nothing anyway). Not held if it never connected.
	holder() {
		if (this.client === null) throw new al.Failed('not held', 'never connected: nothing is held');
		return this.client;
	}

	// --- persistent semaphore -------------------------------------------

	async acquire() {
		const slot = await new al.Semaphore(await this.connected(), this.init.name).acquire();
		if (this.defect === 'verify-from-cache') this.cached = slot;
		return { type: 'acquire_ok', slot };
	}

	async verify(req) {
		const slot = intField(req, 'slot', 1);
		if (this.defect === 'verify-from-cache') return { type: 'verify_ok', held: this.cached === slot };
		const held = this.client !== null && await new al.Semaphore(this.client, this.init.name).verify(slot);
		return { type: 'verify_ok', held };
	}

	async release(req) {
		const slot = intField(req, 'slot', 1);
		this.cached = null;
		await new al.Semaphore(this.holder(), this.init.name).release(slot);
		return { type: 'release_ok' };
	}

	// admin runs op on an Admin of the lock and makes its result a reply.
	async admin(op, reply) {
		return reply(await op(new al.Admin(await this.connected(), this.init.name)));
	}

	// --- true mutex -----------------------------------------------------

	async mutexAcquire() {
		await new al.Mutex(await this.connected(), this.init.name).acquire();
		if (this.defect === 'verify-from-cache') this.cached = 0;
		return { type: 'acquire_ok' };
	}

	async mutexVerify() {
		if (this.defect === 'verify-from-cache') return { type: 'verify_ok', held: this.cached === 0 };
		const held = this.client !== null && await new al.Mutex(this.client, this.init.name).verify();
		return { type: 'verify_ok', held };
	}

	async mutexRelease() {
		this.cached = null;
		await new al.Mutex(this.holder(), this.init.name).release();
		return { type: 'release_ok' };
	}
}

// failure is the reply to a request of type kind that threw e.
function failure(kind, rid, e) {
	if (e instanceof BadRequest) return { type: 'error', code: 'bad request', text: e.message, definite: true };
	if (e instanceof al.Failed) {
		if (kind === 'acquire' && ACQUIRE_FAIL_REASONS.has(e.reason)) return { type: 'acquire_fail', reason: e.reason };
		return { type: 'error', code: e.reason, text: e.message, definite: true };
	}
	if (e instanceof al.BrokerError) {
		log(`${kind} #${rid}: outcome unknown: ${e.message}`);
		return { type: 'error', code: 'broker', text: e.message };
	}
	// A bug here or in amqplib: the outcome is unknown.
	log(`${kind} #${rid} failed: ${e && e.stack}`);
	return { type: 'error', code: 'internal', text: String(e) };
}

function options(argv) {
	let defect = null;
	for (let i = 0; i < argv.length; i++) {
		const [flag, value] = argv[i].includes('=') ? argv[i].split(/=(.*)/s, 2) : [argv[i], argv[i + 1]];
		if (flag === '--defect' && DEFECTS.has(value)) {
			defect = value;
			if (!argv[i].includes('=')) i++;
			continue;
		}
		process.stderr.write(`usage: node lockprover_impl.js [--defect ${[...DEFECTS].join('|')}]\n`);
		process.exit(2);
	}
	return { defect };
}

function main() {
	const { defect } = options(process.argv.slice(2));
	if (defect) log(`seeded defect: ${defect}`);
	// stdout carries replies only.
	console.log = console.error;
	const server = new Server(defect);
	// Requests and the exit run one after the other.
	let chain = Promise.resolve();
	const then = (f) => {
		chain = chain.then(f).catch((e) => log(`internal: ${e && e.stack}`));
	};
	const exit = (code) => then(async () => {
		await server.close();
		process.exit(code);
	});
	process.on('SIGTERM', () => exit(0));
	const rl = readline.createInterface({ input: process.stdin, terminal: false });
	rl.on('line', (line) => {
		if (!line.trim()) return;
		then(async () => {
			if (server.exitCode !== null) return;
			let req = null;
			try {
				req = JSON.parse(line);
			} catch (e) {
				// answered below
			}
			let reply;
			if (req === null || typeof req !== 'object' || Array.isArray(req)) {
				log(`not a JSON object: ${line.slice(0, 200)}`);
				reply = { id: 0, type: 'error', code: 'bad request', text: 'a request must be one JSON object', definite: true };
			} else {
				reply = await server.handle(req);
			}
			process.stdout.write(JSON.stringify(reply) + '\n');
			if (server.exitCode !== null) exit(server.exitCode);
		});
	});
	rl.on('close', () => {
		log('stdin closed: exiting');
		exit(0);
	});
}

main();
