// One thread of the threaded engine (whisperknot-threads.wasm), started by
// whisperknot.mjs in a Node.js worker thread or a Web Worker: an instance
// of the module on the caller's shared memory (its data is set up once, by
// the first instance), on a stack of its own, then waiting in its slot for
// the functions the engine's thread pool hands it (wk-web.c) until the
// worker is ended. Kernel jobs make no system calls; the few WASI functions
// here answer as the main thread's would (the clock) or fail cleanly.
const isNode = typeof process !== 'undefined' && !!process.versions?.node;

async function run({ mod, memory, stackTop, idx }, post) {
  const ENOSYS = 52;
  const wasi = new Proxy({}, {
    get: (_, name) => {
      if (name === 'clock_time_get') {
        return (id, precision, out) => {
          const ns = BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
          new DataView(memory.buffer).setBigUint64(out, ns, true);
          return 0;
        };
      }
      if (name === 'sched_yield') return () => 0;
      return () => ENOSYS;
    },
  });
  const instance = await WebAssembly.instantiate(mod, {
    env: { memory },
    wasi_snapshot_preview1: wasi,
    wk_host: { deflate: () => -1 },
  });
  instance.exports.wkw_set_stack(stackTop);
  post({ type: 'ready' });
  instance.exports.wkw_worker_loop(idx); // returns only for a bad idx
}

function fail(post, e) {
  post({ type: 'error', message: String(e?.message ?? e) });
}

if (isNode) {
  const { workerData, parentPort } = await import('node:worker_threads');
  const post = (m) => parentPort.postMessage(m);
  run(workerData, post).catch((e) => fail(post, e));
} else {
  const post = (m) => self.postMessage(m);
  self.addEventListener('message', ({ data }) => run(data, post).catch((e) => fail(post, e)), { once: true });
}
