'use strict';
// The loop the node adapters of examples/upstream (node-redlock,
// node-redis-semaphore) share to serve lockprover's process protocol
// (docs/protocol.md) for a lease lock, as serve.go is the Go adapters':
// each request, one JSON object a line on stdin, is handed to the
// adapter in order, and its reply written on stdout with the request's
// id; and the refusals and a lease operation's checks every adapter gives
// alike. An adapter requires it by its path (it needs no package), so
// that each adapter's package.json and lock file stay its library's.

const readline = require('readline');

// refuse is a definite error: the request did nothing.
function refuse(code, text) {
	return { type: 'error', code, text, definite: true };
}

// lease checks a lease operation's request (acquire, refresh or
// release) as these adapters check it, in this order: its type, that
// init came first (initialised), its ttl_ms (but a release's), its token
// (but an acquire's). A refusal, or null where the request passes.
function lease(req, initialised) {
	if (!['acquire', 'refresh', 'release'].includes(req.type)) return refuse('unsupported', `request type ${JSON.stringify(req.type)}`);
	if (!initialised) return refuse('not initialised', 'the first request must be init');
	if (req.type !== 'release' && !(Number.isInteger(req.ttl_ms) && req.ttl_ms > 0)) return refuse('bad request', '"ttl_ms" must be a positive integer');
	if (req.type !== 'acquire' && !(typeof req.token === 'string' && req.token !== '')) return refuse('bad request', '"token" must be a non-empty string');
	return null;
}

// lines answers the requests of stdin one after the other: handle(req)'s
// reply (awaited; an exception is an internal error), with the request's
// id, on stdout. A line that is not JSON, or not an object with an
// integer id, gets no reply: it is told to log. When stdin ends, after
// the last reply, done() runs and the process exits.
function lines(handle, log, done) {
	let chain = Promise.resolve();
	const rl = readline.createInterface({ input: process.stdin, terminal: false });
	rl.on('line', (line) => {
		chain = chain.then(async () => {
			let req;
			try {
				req = JSON.parse(line);
			} catch (e) {
				log(`a request that is not JSON: ${line}`);
				return;
			}
			if (req === null || typeof req !== 'object' || !Number.isInteger(req.id)) {
				log(`a request without an id: ${line}`);
				return;
			}
			let r;
			try {
				r = await handle(req);
			} catch (e) {
				r = { type: 'error', code: 'internal', text: String(e && e.stack) };
			}
			r.id = req.id;
			process.stdout.write(JSON.stringify(r) + '\n');
		});
	});
	rl.on('close', () => {
		chain.then(() => {
			done();
			process.exit(0);
		});
	});
}

module.exports = { refuse, lease, lines };
