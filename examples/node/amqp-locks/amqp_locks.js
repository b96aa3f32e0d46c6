'use strict';
// amqp-locks for Node.js: a persistent semaphore and a true mutex on
// RabbitMQ, with amqplib (package.json pins its version). A port of
// examples/python/amqp_locks.py, the same design call for call:
//
// A semaphore named N with C slots is the durable queues N-1-A .. N-C-A (the
// slots). A client holds slot L while its connection owns the exclusive
// queue N-L-B; RabbitMQ lets exactly one connection own an exclusive queue,
// so at most one client holds each slot. Admins add and remove slots by
// declaring and deleting A queues under an administration mutex, the
// exclusive queue N. A true mutex named N is the exclusive queue N itself.
//
// Queue existence is probed with a mandatory publish under publisher
// confirms: a basic.return (which the broker sends before the ack) means
// the queue does not exist. Unlike a passive declare, a probe never breaks
// the channel. Every queue is declared with x-max-length 0, so that the
// probes' empty messages are dropped instead of piling up.
//
// A Client is one connection and one channel in confirm mode, and never
// reconnects: once its connection is lost, everything it held is lost, and
// a new Client is needed. A Client serves one operation at a time.

const amqp = require('amqplib');

// The AMQP reply code for another connection's exclusive queue.
const RESOURCE_LOCKED = 405;

// Every queue is length-limited to 0 (default overflow: drop-head), so that
// the existence probes published to it are acknowledged and then dropped.
const MAX_LENGTH = 0;

function slotQueue(name, slot) {
	return `${name}-${slot}-A`;
}

function holderQueue(name, slot) {
	return `${name}-${slot}-B`;
}

// --- Errors -------------------------------------------------------------

// Failed: the operation certainly did not take effect; reason names why
// (full, absent, unavailable, contended, held, exists, not held).
class Failed extends Error {
	constructor(reason, message) {
		super(message);
		this.reason = reason;
	}
}

// BrokerError: the broker failed in a way the spec does not expect; the
// operation's outcome is unknown.
class BrokerError extends Error {}

// ChannelError: the broker closed the channel (code is the AMQP reply
// code); the connection, and what it holds, survive, and the Client has
// already opened a new channel (or will at its next call).
class ChannelError extends BrokerError {
	constructor(code, message) {
		super(message);
		this.code = code;
	}
}

// ConnectionLost: the connection is gone (or could not be opened).
// Everything the Client held is lost; an operation in progress has an
// unknown outcome.
class ConnectionLost extends BrokerError {}

function describe(e) {
	return e ? (e.message || String(e)) : 'unknown';
}

function sleep(ms) {
	return new Promise((resolve) => setTimeout(resolve, ms));
}

// --- Client -------------------------------------------------------------

class Client {
	// connect opens a Client's connection and channel. heartbeat is the
	// heartbeat to propose in whole seconds (undefined: none, the broker's
	// value applies), connectTimeout (ms) bounds the TCP connect and the
	// handshake, name is the connection's name in the management UI, log a
	// function of one string.
	static async connect(url, { heartbeat, name, connectTimeout = 5000, log = () => {} } = {}) {
		const u = new URL(url);
		if (heartbeat !== undefined) u.searchParams.set('heartbeat', String(heartbeat));
		let conn;
		try {
			conn = await amqp.connect(u.toString(), { timeout: connectTimeout, clientProperties: { connection_name: name } });
		} catch (e) {
			throw new ConnectionLost(`could not connect: ${describe(e)}`);
		}
		const c = new Client(conn, log);
		try {
			await c.reopenChannel();
		} catch (e) {
			await c.close();
			throw new ConnectionLost(`could not open a channel: ${describe(e)}`);
		}
		return c;
	}

	constructor(conn, log) {
		this.conn = conn;
		this.log = log;
		this.channel = null;
		this.held = new Set(); // the exclusive queues this connection declared
		this.relinquished = new Set(); // those of them a verify found gone
		this.lost = null; // why the connection is gone, once it is
		this.returned = []; // routing keys of the messages returned on the current channel
		conn.on('error', (e) => log(`connection error: ${describe(e)}`));
		conn.on('close', (e) => {
			if (this.lost !== null) return;
			this.lost = e || new Error('closed');
			this.forget();
			log(`connection lost: ${describe(e)}`);
		});
	}

	// isOpen: true while the connection is alive, as far as the client knows.
	get isOpen() {
		return this.lost === null;
	}

	forget() {
		this.channel = null;
		this.held.clear();
		this.relinquished.clear();
	}

	// close closes the connection, which releases everything the client
	// holds (RabbitMQ deletes its exclusive queues before close-ok); it
	// gives up waiting after two seconds (a partitioned broker).
	async close() {
		if (this.lost !== null) return;
		this.lost = new Error('closed by the client');
		this.forget();
		try {
			await Promise.race([this.conn.close(), sleep(2000)]);
		} catch (e) {
			this.log(`closing the connection: ${describe(e)}`);
		}
	}

	async reopenChannel() {
		this.channel = null;
		const ch = await this.conn.createConfirmChannel();
		ch.on('error', (e) => this.log(`channel error: ${describe(e)}`));
		ch.on('close', () => {
			if (this.channel === ch) this.channel = null;
		});
		ch.on('return', (msg) => this.returned.push(msg.fields.routingKey));
		this.channel = ch;
	}

	// call runs op(channel); what names it in errors. A channel the broker
	// closed becomes a ChannelError (after a new channel was opened, as the
	// spec's acquire does after a RESOURCE_LOCKED), a dead connection
	// ConnectionLost.
	async call(what, op) {
		if (!this.isOpen) throw new ConnectionLost(`${what}: the connection is gone: ${describe(this.lost)}`);
		try {
			if (this.channel === null) await this.reopenChannel();
			return await op(this.channel);
		} catch (e) {
			if (!this.isOpen) throw new ConnectionLost(`${what}: ${describe(e)}`);
			if (typeof e.code === 'number') {
				try {
					await this.reopenChannel();
				} catch (again) {
					this.log(`reopening the channel: ${describe(again)}`);
				}
				throw new ChannelError(e.code, `${what}: ${describe(e)}`);
			}
			throw new BrokerError(`${what}: ${describe(e)}`);
		}
	}

	// exists probes queue with a mandatory publish under confirms. A return
	// means it does not exist; an ack without a return (or a nack, from a
	// queue with x-overflow reject-publish) means it does.
	exists(queue) {
		return this.call(`probe ${queue}`, (ch) => new Promise((resolve, reject) => {
			this.returned = [];
			ch.publish('', queue, Buffer.alloc(0), { mandatory: true }, (err) => {
				if (err && !/nacked/.test(err.message)) {
					reject(err);
					return;
				}
				resolve(!this.returned.includes(queue));
			});
		}));
	}

	// declareExclusive declares queue exclusively to this connection; false
	// when another connection owns it (RESOURCE_LOCKED, which costs a
	// channel).
	async declareExclusive(queue) {
		try {
			await this.call(`declare ${queue}`, (ch) => ch.assertQueue(queue, { exclusive: true, durable: false, maxLength: MAX_LENGTH }));
		} catch (e) {
			if (e instanceof ChannelError && e.code === RESOURCE_LOCKED) return false;
			throw e;
		}
		this.held.add(queue);
		this.relinquished.delete(queue);
		return true;
	}

	async declareDurable(queue) {
		await this.call(`declare ${queue}`, (ch) => ch.assertQueue(queue, { durable: true, maxLength: MAX_LENGTH }));
	}

	// remove deletes queue and waits for delete-ok (deleting a missing
	// queue succeeds).
	async remove(queue) {
		await this.call(`delete ${queue}`, (ch) => ch.deleteQueue(queue));
		this.held.delete(queue);
		this.relinquished.delete(queue);
	}

	// verifyHeld: whether this client still holds the exclusive queue held:
	// it declared it, and a probe of probe is routed on its live
	// connection. One that finds probe gone relinquishes held (the spec's
	// lock-relinquished): it says false from then on, and the client keeps
	// the queue until its release deletes it.
	async verifyHeld(held, probe) {
		if (!this.held.has(held) || this.relinquished.has(held) || !this.isOpen) return false;
		try {
			if (await this.exists(probe)) return true;
		} catch (e) {
			if (e instanceof ConnectionLost) return false;
			throw e;
		}
		this.relinquished.add(held);
		return false;
	}

	async release(queue) {
		if (!this.held.has(queue) || !this.isOpen) throw new Failed('not held', `${queue} is not held by this client`);
		await this.remove(queue);
	}

	// sleep waits ms, then fails if the connection was lost meanwhile.
	async sleep(ms) {
		await sleep(ms);
		if (!this.isOpen) throw new ConnectionLost(describe(this.lost));
	}
}

// --- Persistent semaphore: clients --------------------------------------

// Semaphore is a client's handle on the persistent semaphore name. retries
// bounds how many times acquire restarts its scan after losing a race for
// a B queue.
class Semaphore {
	constructor(client, name, { retries = 3 } = {}) {
		this.client = client;
		this.name = name;
		this.retries = retries;
	}

	// acquire takes a free slot and returns its number. It follows the spec:
	// for L from 1, if A[L] does not exist fail; if B[L] exists try L+1;
	// otherwise declare B[L] exclusively. Losing that declare to another
	// client (RESOURCE_LOCKED) restarts the scan from 1, at most retries
	// times. A slot taken is verified (A[L] still exists) before it is
	// returned.
	async acquire() {
		for (let attempt = 0; ; attempt++) {
			const slot = await this.scan();
			if (slot !== null) return slot;
			if (attempt >= this.retries) throw new Failed('contended', `lost ${attempt + 1} races for a slot of ${this.name}`);
			this.client.log(`lost a race for a slot of ${this.name}, scanning again`);
		}
	}

	// scan is one pass over the slots from 1: the slot taken, or null after
	// a lost race.
	async scan() {
		const c = this.client;
		for (let slot = 1; ; slot++) {
			if (!(await c.exists(slotQueue(this.name, slot)))) throw this.missing(slot);
			const holder = holderQueue(this.name, slot);
			if (await c.exists(holder)) continue;
			if (!(await c.declareExclusive(holder))) return null;
			if (await c.exists(slotQueue(this.name, slot))) return slot;
			// An admin removed the slot while we took it: give it back.
			await c.release(holder);
			throw this.missing(slot);
		}
	}

	// missing is the failure of a scan that found no slot at slot: the
	// semaphore has no slots (absent), or every slot was held (full).
	missing(slot) {
		if (slot === 1) return new Failed('absent', `${this.name} has no slots`);
		return new Failed('full', `every slot of ${this.name} is held`);
	}

	// verify: whether the client still holds slot (one mandatory publish to
	// A[slot]).
	verify(slot) {
		return this.client.verifyHeld(holderQueue(this.name, slot), slotQueue(this.name, slot));
	}

	release(slot) {
		return this.client.release(holderQueue(this.name, slot));
	}
}

// --- Persistent semaphore: administration --------------------------------

// Admin is an administrator's handle on the persistent semaphore name.
// Every operation but wait runs under the administration mutex, the
// exclusive queue name; an admin that finds it held retries retries times,
// pollMs apart, then fails contended.
class Admin {
	constructor(client, name, { retries = 3, pollMs = 100 } = {}) {
		this.client = client;
		this.name = name;
		this.retries = retries;
		this.pollMs = pollMs;
	}

	create(slots) {
		return this.locked(async () => {
			const have = await this.countSlots();
			if (have > 0) throw new Failed('exists', `the semaphore already has ${have} slots`);
			for (let slot = 1; slot <= slots; slot++) await this.client.declareDurable(slotQueue(this.name, slot));
		});
	}

	// change adds delta slots above the highest, or removes -delta from the
	// top down (never below zero); it returns [before, after].
	change(delta) {
		return this.locked(async () => {
			const before = await this.countSlots();
			const after = Math.max(0, before + delta);
			for (let slot = before + 1; slot <= after; slot++) await this.client.declareDurable(slotQueue(this.name, slot));
			await this.deleteSlots(after + 1, before);
			return [before, after];
		});
	}

	count() {
		return this.locked(() => this.countSlots());
	}

	destroy() {
		return this.locked(async () => {
			const before = await this.countSlots();
			await this.deleteSlots(1, before);
			return before;
		});
	}

	// wait returns once slot's holder has let go (B[slot] no longer exists).
	async wait(slot) {
		while (await this.client.exists(holderQueue(this.name, slot))) await this.client.sleep(this.pollMs);
	}

	// countSlots: the highest L such that A[1]..A[L] exist.
	async countSlots() {
		for (let slot = 1; ; slot++) {
			if (!(await this.client.exists(slotQueue(this.name, slot)))) return slot - 1;
		}
	}

	// deleteSlots deletes A[high] down to A[low], each delete confirmed
	// before the next, so that the slots stay 1..C even if the admin dies
	// midway.
	async deleteSlots(low, high) {
		for (let slot = high; slot >= low; slot--) await this.client.remove(slotQueue(this.name, slot));
	}

	// locked runs operation() under the administration mutex.
	async locked(operation) {
		const c = this.client;
		for (let attempt = 0; !(await c.declareExclusive(this.name)); attempt++) {
			if (attempt >= this.retries) throw new Failed('contended', `the administration mutex ${this.name} is held`);
			await c.sleep(this.pollMs);
		}
		let result;
		try {
			result = await operation();
		} catch (e) {
			// Keep the operation's error; the mutex goes with the connection
			// if it cannot be deleted.
			if (c.isOpen) {
				try {
					await c.remove(this.name);
				} catch (again) {
					c.log(`releasing the administration mutex: ${describe(again)}`);
				}
			}
			throw e;
		}
		await c.remove(this.name);
		return result;
	}
}

// --- True mutex -----------------------------------------------------------

// Mutex is a true mutex: the exclusive queue name. It exists only while
// held and needs no administration.
class Mutex {
	constructor(client, name) {
		this.client = client;
		this.name = name;
	}

	async acquire() {
		if (!(await this.client.declareExclusive(this.name))) throw new Failed('held', `${this.name} is held by another client`);
	}

	verify() {
		return this.client.verifyHeld(this.name, this.name);
	}

	release() {
		return this.client.release(this.name);
	}
}

module.exports = {
	Client, Semaphore, Admin, Mutex, slotQueue, holderQueue,
	Failed, BrokerError, ChannelError, ConnectionLost, describe,
};
