// Preloaded (node --require) into an adapter's process by
// TestNodeRedisSemaphoreFindings: after the process's first reply
// (init_ok) its event loop is held for 250 ms, so that ioredis connects
// and sends its ready check (INFO) late, after a plan's drop-reply is
// armed, as a node process on a loaded machine did. The lost reply must
// still be the lock's command's, not INFO's.
const write = process.stdout.write.bind(process.stdout);
let first = true;
process.stdout.write = (...args) => {
	const r = write(...args);
	if (first) {
		first = false;
		setImmediate(() => {
			const t = Date.now();
			while (Date.now() - t < 250) {}
		});
	}
	return r;
};
