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
  try {
    instance.exports.wkw_worker_loop(idx); // returns only for a bad idx
  } catch (e) {
    // A trap on this thread (a bug of the engine): the function it ran
    // never returns, so the thread waiting for it would wait forever. The
    // flag makes every wait of the module trap instead, the main thread's
    // included, which whisperknot.mjs reports as an error. A worker that
    // trapped because the flag was set already says nothing more.
    const flag = new Int32Array(memory.buffer, instance.exports.wkw_failed_flag(), 1);
    if (Atomics.exchange(flag, 0, 1) === 0)
      console.error(`whisperknot: worker ${idx} trapped:`, e);
  }
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
