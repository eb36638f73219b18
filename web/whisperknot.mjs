// whisperknot in JavaScript: the engine's WebAssembly build (whisperknot.wasm,
// made by web/build.sh) behind the C API's objects, the same module in
// Node.js and in a browser.
//
//   const wk = await Whisperknot.create();          // instantiates the module
//   const model = await wk.loadModel(urlOrPathOrBytes);
//   const stream = model.createStream({ beamSize: 1 });
//   stream.feed(float32Samples16kHz);                // any number of times
//   stream.finish();
//   for (const seg of stream.take()) console.log(seg.text);
//   stream.free(); model.free();
//
// Where the JavaScript engine runs relaxed SIMD (Chromium and Firefox
// since 2023, Node.js 22; Node.js 20 with --experimental-wasm-relaxed-simd),
// create() loads whisperknot-relaxed.wasm: the native AVX2 kernels built
// for wasm with fused multiply-adds, faster and with native AVX2's bits
// (web/README.md); elsewhere, or with { relaxedSimd: false },
// whisperknot.wasm, SIMD128 only.
//
// Whisperknot.create({ threads: n }) runs the engine on n threads: the
// threaded module (whisperknot-threads.wasm, or with relaxed SIMD
// whisperknot-threads-relaxed.wasm, the same choice as above) on a shared
// memory, with n - 1 workers (whisperknot-thread.mjs) that compute beside
// the caller.
// That needs SharedArrayBuffer (in a browser a cross-origin isolated page,
// COOP/COEP) and a caller that may block: Node.js or a Web Worker.
//
// Engine failures throw WhisperknotError with the engine's message. Files
// the engine opens (the knot, the VAD model) live in a small read-only file
// system inside this module: the engine's loader reads them, as natively
// with mmap, straight into WebAssembly memory, the one copy they get.

// zlib's deflate, for the engine's compression-ratio check: pako's output
// is zlib's byte for byte (Node's own zlib, Chromium's fork, is not)
import pako from './node_modules/pako/dist/pako.esm.mjs';

const isNode = typeof process !== 'undefined' && !!process.versions?.node;

/** An engine status other than WK_OK, with the engine's message. */
export class WhisperknotError extends Error {
  constructor(message, status) {
    super(message);
    this.name = 'WhisperknotError';
    this.status = status;
  }
}

// wk_cue_kind's values, in whisperknot.h's order
const CUE_KINDS = ['text', 'gap', 'utterance-end'];

// wk_status names, in whisperknot.h's order
const STATUS = ['ok', 'io', 'format', 'unsupported', 'nomem', 'arg', 'state', 'internal'];

const VAD_FILE = 'silero-v6.2.0.knot';
const FS_ROOT = '/whisperknot/';

// u8[start, end) for a consumer that refuses views of a SharedArrayBuffer
// (TextDecoder, pako): copied where it is the threaded module's memory.
function unsharedView(u8, start, end) {
  const shared = typeof SharedArrayBuffer !== 'undefined' && u8.buffer instanceof SharedArrayBuffer;
  return shared ? u8.slice(start, end) : u8.subarray(start, end);
}

function decodeUtf8(u8, start, end) {
  return new TextDecoder().decode(unsharedView(u8, start, end));
}

// Why this context cannot run the threaded module (null: it can).
function threadsUnavailable() {
  if (typeof SharedArrayBuffer === 'undefined' || typeof Atomics === 'undefined')
    return 'this JavaScript engine has no SharedArrayBuffer';
  if (isNode) return null;
  if (globalThis.crossOriginIsolated !== true)
    return 'the page is not cross-origin isolated (serve it with Cross-Origin-Opener-Policy: same-origin and Cross-Origin-Embedder-Policy: require-corp)';
  if (typeof globalThis.WorkerGlobalScope === 'undefined' || !(globalThis instanceof globalThis.WorkerGlobalScope))
    return "a page's main thread may not wait for other threads: create the engine in a Web Worker";
  return null;
}

const MAX_WORKERS = 16; // wk-web.c's WKW_MAX_WORKERS
const WORKER_STACK = 4 << 20; // bytes of stack per worker (the main thread has 8 MiB)

// The threaded module's memory: 512 pages (32 MiB, above the module's own
// minimum), growing to at most the 2 GiB it was linked for. A shared
// memory reserves its maximum up front, which a 32-bit browser (many
// Android phones) cannot do for 2 GiB: then 1 GiB, then 512 MiB (a smaller
// maximum than the module's is a valid import; the engine's allocations
// fail cleanly past it).
function sharedMemory() {
  for (const maximum of [32768, 16384, 8192]) {
    try {
      return new WebAssembly.Memory({ initial: 512, maximum, shared: true });
    } catch (e) {
      if (!(e instanceof RangeError) || maximum === 8192)
        throw new WhisperknotError(`cannot reserve the threaded module's memory: ${e.message}`, 4);
    }
  }
}

async function readSource(src) {
  if (src instanceof ArrayBuffer) return new Uint8Array(src);
  if (ArrayBuffer.isView(src)) return new Uint8Array(src.buffer, src.byteOffset, src.byteLength);
  if (typeof Response !== 'undefined' && src instanceof Response) {
    if (!src.ok) throw new WhisperknotError(`cannot fetch '${src.url}': HTTP ${src.status}`, 1);
    return new Uint8Array(await src.arrayBuffer());
  }
  const url = src instanceof URL ? src : null;
  if (isNode && (url ? url.protocol === 'file:' : !/^[a-z]+:\/\//i.test(String(src)))) {
    const fs = await import('node:fs/promises');
    try {
      return new Uint8Array(await fs.readFile(url ?? String(src)));
    } catch (e) {
      throw new WhisperknotError(`cannot read '${url ?? src}': ${e.message}`, 1);
    }
  }
  const res = await fetch(url ?? String(src));
  if (!res.ok) throw new WhisperknotError(`cannot fetch '${url ?? src}': HTTP ${res.status}`, 1);
  return new Uint8Array(await res.arrayBuffer());
}

// ---- WASI preview 1, as much as the engine uses ---------------------------

const E = { SUCCESS: 0, BADF: 8, INVAL: 28, NOENT: 44, NOSYS: 52, ROFS: 69, NOTCAPABLE: 76, ISDIR: 31 };
const FILETYPE = { CHAR: 2, DIR: 3, REG: 4 };

class Wasi {
  constructor(env, log) {
    this.env = env;
    this.log = log;
    this.files = new Map(); // path (no leading /) -> { data, ino, mtime }
    this.fds = new Map(); // fd -> { file, pos }
    this.nextFd = 4;
    this.nextIno = 1;
    this.lineBuf = ['', '', ''];
    this.memory = null;
  }

  addFile(path, data) {
    const key = path.replace(/^\/+/, '');
    this.files.set(key, { data, size: data.byteLength, ino: this.nextIno++, mtime: Date.now() });
  }

  // The engine keeps a knot's descriptor open to fstat it before each use:
  // the entry stays, its bytes (already copied into wasm memory) go.
  releaseData(path) {
    const f = this.files.get(path.replace(/^\/+/, ''));
    if (f) f.data = null;
  }

  removeFile(path) {
    this.files.delete(path.replace(/^\/+/, ''));
  }

  get u8() { return new Uint8Array(this.memory.buffer); }
  get dv() { return new DataView(this.memory.buffer); }

  str(ptr, len) { return decodeUtf8(this.u8, ptr, ptr + len); }

  writeStat(ptr, file, type) {
    const dv = this.dv;
    for (let i = 0; i < 64; i += 8) dv.setBigUint64(ptr + i, 0n, true);
    dv.setBigUint64(ptr, 1n, true); // dev
    dv.setBigUint64(ptr + 8, BigInt(file ? file.ino : 0), true);
    dv.setUint8(ptr + 16, type);
    dv.setBigUint64(ptr + 24, 1n, true);
    dv.setBigUint64(ptr + 32, BigInt(file ? file.size : 0), true);
    const t = BigInt(file ? file.mtime : 0) * 1000000n;
    dv.setBigUint64(ptr + 40, t, true);
    dv.setBigUint64(ptr + 48, t, true);
    dv.setBigUint64(ptr + 56, t, true);
  }

  lookup(dirfd, ptr, len) {
    if (dirfd !== 3) return null;
    const p = this.str(ptr, len).replace(/^\.?\/+/, '');
    return { path: p, file: this.files.get(p) };
  }

  read(fd, iovs, n, offset, outPtr) {
    const h = this.fds.get(fd);
    if (!h) return E.BADF;
    if (!h.file.data) return E.BADF;
    let pos = offset ?? h.pos, total = 0;
    const dv = this.dv, u8 = this.u8;
    for (let i = 0; i < n; i++) {
      const buf = dv.getUint32(iovs + 8 * i, true), len = dv.getUint32(iovs + 8 * i + 4, true);
      const m = Math.max(0, Math.min(len, h.file.size - pos));
      u8.set(h.file.data.subarray(pos, pos + m), buf);
      pos += m;
      total += m;
      if (m < len) break;
    }
    if (offset === undefined) h.pos = pos;
    dv.setUint32(outPtr, total, true);
    return E.SUCCESS;
  }

  imports() {
    const self = this;
    return {
      environ_sizes_get(countPtr, sizePtr) {
        const enc = self.env.map((s) => new TextEncoder().encode(s + '\0'));
        self.dv.setUint32(countPtr, enc.length, true);
        self.dv.setUint32(sizePtr, enc.reduce((a, b) => a + b.length, 0), true);
        return E.SUCCESS;
      },
      environ_get(envPtr, bufPtr) {
        let p = bufPtr;
        self.env.forEach((s, i) => {
          const b = new TextEncoder().encode(s + '\0');
          self.dv.setUint32(envPtr + 4 * i, p, true);
          self.u8.set(b, p);
          p += b.length;
        });
        return E.SUCCESS;
      },
      clock_time_get(id, precision, outPtr) {
        // 0 realtime, else monotonic (performance.now has microseconds)
        const ns = id === 0 ? BigInt(Date.now()) * 1000000n
          : BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));
        self.dv.setBigUint64(outPtr, ns, true);
        return E.SUCCESS;
      },
      fd_write(fd, iovs, n, outPtr) {
        let total = 0;
        for (let i = 0; i < n; i++) {
          const buf = self.dv.getUint32(iovs + 8 * i, true), len = self.dv.getUint32(iovs + 8 * i + 4, true);
          if (fd === 1 || fd === 2) {
            self.lineBuf[fd] += self.str(buf, len);
            const lines = self.lineBuf[fd].split('\n');
            self.lineBuf[fd] = lines.pop();
            for (const l of lines) self.log(l);
          }
          total += len;
        }
        self.dv.setUint32(outPtr, total, true);
        return fd === 1 || fd === 2 ? E.SUCCESS : E.BADF;
      },
      fd_read(fd, iovs, n, outPtr) { return self.read(fd, iovs, n, undefined, outPtr); },
      fd_pread(fd, iovs, n, offset, outPtr) { return self.read(fd, iovs, n, Number(offset), outPtr); },
      fd_seek(fd, offset, whence, outPtr) {
        const h = self.fds.get(fd);
        if (!h) return E.BADF;
        const base = whence === 0 ? 0 : whence === 1 ? h.pos : h.file.size;
        const pos = base + Number(offset);
        if (pos < 0) return E.INVAL;
        h.pos = pos;
        self.dv.setBigUint64(outPtr, BigInt(pos), true);
        return E.SUCCESS;
      },
      fd_close(fd) { return self.fds.delete(fd) ? E.SUCCESS : E.BADF; },
      fd_fdstat_get(fd, ptr) {
        const type = fd <= 2 ? FILETYPE.CHAR : fd === 3 ? FILETYPE.DIR : self.fds.has(fd) ? FILETYPE.REG : -1;
        if (type < 0) return E.BADF;
        self.dv.setUint8(ptr, type);
        self.dv.setUint16(ptr + 2, 0, true);
        self.dv.setBigUint64(ptr + 8, 0xffffffffffffffffn, true);
        self.dv.setBigUint64(ptr + 16, 0xffffffffffffffffn, true);
        return E.SUCCESS;
      },
      fd_fdstat_set_flags() { return E.SUCCESS; },
      fd_filestat_get(fd, ptr) {
        if (fd === 3) { self.writeStat(ptr, null, FILETYPE.DIR); return E.SUCCESS; }
        const h = self.fds.get(fd);
        if (!h) return E.BADF;
        self.writeStat(ptr, h.file, FILETYPE.REG);
        return E.SUCCESS;
      },
      fd_prestat_get(fd, ptr) {
        if (fd !== 3) return E.BADF;
        self.dv.setUint32(ptr, 0, true); // a directory
        self.dv.setUint32(ptr + 4, 1, true); // "/"
        return E.SUCCESS;
      },
      fd_prestat_dir_name(fd, ptr, len) {
        if (fd !== 3) return E.BADF;
        if (len >= 1) self.u8[ptr] = 47;
        return E.SUCCESS;
      },
      path_filestat_get(dirfd, flags, ptr, len, out) {
        const r = self.lookup(dirfd, ptr, len);
        if (!r) return E.BADF;
        if (r.path === '' || r.path === 'whisperknot' || r.path === 'whisperknot/') {
          self.writeStat(out, null, FILETYPE.DIR);
          return E.SUCCESS;
        }
        if (!r.file) return E.NOENT;
        self.writeStat(out, r.file, FILETYPE.REG);
        return E.SUCCESS;
      },
      path_open(dirfd, dirflags, ptr, len, oflags, rightsBase, rightsInh, fdflags, fdPtr) {
        const r = self.lookup(dirfd, ptr, len);
        if (!r) return E.BADF;
        if (oflags & (1 | 8)) return E.ROFS; // O_CREAT, O_TRUNC
        if (!r.file) return E.NOENT;
        if (oflags & 2) return E.NOTCAPABLE; // O_DIRECTORY
        const fd = self.nextFd++;
        self.fds.set(fd, { file: r.file, pos: 0 });
        self.dv.setUint32(fdPtr, fd, true);
        return E.SUCCESS;
      },
      proc_exit(code) { throw new WhisperknotError(`the engine exited (${code})`, 7); },
    };
  }
}

// ---- the module -------------------------------------------------------------

// the modules create() compiled, [single-threaded, threaded]
const defaultModules = [null, null];
const defaultRelaxedModules = [null, null];

// A module whose one function uses f32x4.relaxed_madd: valid where the
// engine runs relaxed SIMD.
const relaxedProbe = new Uint8Array([
  0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00,
  0x01, 0x05, 0x01, 0x60, 0x00, 0x01, 0x7b, // type: () -> v128
  0x03, 0x02, 0x01, 0x00, // one function of that type
  0x0a, 0x3d, 0x01, 0x3b, 0x00, // its code, no locals:
  ...[0, 1, 2].flatMap(() => [0xfd, 0x0c, ...new Array(16).fill(0)]), // 3 x v128.const 0
  0xfd, 0x85, 0x02, 0x0b, // f32x4.relaxed_madd, end
]);

/** Whether this JavaScript engine runs WebAssembly's relaxed SIMD (and so
 * whisperknot-relaxed.wasm). */
export function hasRelaxedSimd() {
  try {
    return WebAssembly.validate(relaxedProbe);
  } catch {
    return false;
  }
}

/** The engine's clock (wk_clock_seconds): seconds on the monotonic clock
 * this module gives it, performance.timeOrigin + performance.now(), which
 * a page's main thread and its workers share. */
export function clockSeconds() {
  return (performance.timeOrigin + performance.now()) / 1000;
}

/** One instance of the WebAssembly engine: its memory holds the models and
 * streams made from it. */
export class Whisperknot {
  /**
   * @param {object} [opts]
   * @param {WebAssembly.Module|ArrayBuffer|Uint8Array|URL|string} [opts.wasm]
   *   the module (default: whisperknot.wasm next to this file)
   * @param {Record<string,string>} [opts.env] environment the engine sees
   *   (WK_KERNELS=ref forces the reference kernels)
   * @param {(line: string) => void} [opts.log] the engine's stderr lines
   * @param {number} [opts.threads] threads the engine computes on (default
   *   1; more: the threaded module, see the top of this file)
   * @param {boolean} [opts.relaxedSimd] false: the SIMD128 module even where
   *   the engine runs relaxed SIMD (default true, see the top of this file)
   */
  static async create(opts = {}) {
    const threads = opts.threads ?? 1;
    if (!Number.isInteger(threads) || threads < 1 || threads > MAX_WORKERS + 1)
      throw new WhisperknotError(`threads must be an integer from 1 to ${MAX_WORKERS + 1}, not ${threads}`, 5);
    const why = threadsUnavailable();
    if (threads > 1 && why) throw new WhisperknotError(`cannot run ${threads} threads: ${why}`, 3);
    let mod = opts.wasm;
    if (!mod) {
      const t = threads > 1 ? 1 : 0;
      if (opts.relaxedSimd !== false && hasRelaxedSimd()) {
        // a build without clang >= 16 and SIMDe has no relaxed modules;
        // one this engine cannot compile falls back too
        defaultRelaxedModules[t] ??= readSource(new URL(t ? './whisperknot-threads-relaxed.wasm' : './whisperknot-relaxed.wasm', import.meta.url))
          .then((b) => WebAssembly.compile(b)).catch(() => null);
        mod = await defaultRelaxedModules[t];
      }
      if (!mod) {
        defaultModules[t] ??= readSource(new URL(t ? './whisperknot-threads.wasm' : './whisperknot.wasm', import.meta.url))
          .then((b) => WebAssembly.compile(b))
          .catch((e) => { defaultModules[t] = null; throw e; });
        mod = await defaultModules[t];
      }
    } else if (!(mod instanceof WebAssembly.Module)) {
      mod = await WebAssembly.compile(await readSource(mod));
    }
    // the threaded module imports its memory (shared with its workers)
    const shared = WebAssembly.Module.imports(mod).some((i) => i.kind === 'memory');
    if (shared && why) throw new WhisperknotError(`cannot run the threaded module: ${why}`, 3);
    if (threads > 1 && !shared)
      throw new WhisperknotError(`${threads} threads need the threaded module (whisperknot-threads.wasm); opts.wasm is the single-threaded one`, 5);
    const memory = shared ? sharedMemory() : null;
    const env = Object.entries(opts.env ?? {}).map(([k, v]) => `${k}=${v}`);
    const wasi = new Wasi(env, opts.log ?? ((l) => console.warn(l)));
    const wk = new Whisperknot(wasi);
    const instance = await WebAssembly.instantiate(mod, {
      ...(shared ? { env: { memory } } : {}),
      wasi_snapshot_preview1: wasi.imports(),
      wk_host: { deflate: (src, n, dst, cap, level) => wk.#deflate(src, n, dst, cap, level) },
    });
    // (the threaded module's allocator is wk-web.c's locked wrapper)
    const e = instance.exports;
    const x = shared ? wk.#guarded({ ...e, memory, malloc: e.__wrap_malloc, free: e.__wrap_free }) : e;
    wasi.memory = x.memory;
    x._initialize();
    wk.#init(x);
    if (threads > 1) await wk.#startWorkers(mod, memory, threads - 1);
    return wk;
  }

  #workers = [];

  // n workers on the shared memory, each with a stack from the engine's
  // heap; resolves once every one waits in its slot (wk-web.c), after
  // which new streams compute on n + 1 threads.
  async #startWorkers(mod, memory, n) {
    const x = this.#x;
    const url = new URL('./whisperknot-thread.mjs', import.meta.url);
    const WorkerClass = isNode ? (await import('node:worker_threads')).Worker : Worker;
    const started = [];
    for (let i = 0; i < n; i++) {
      const base = x.malloc(WORKER_STACK + 16);
      if (!base) throw new WhisperknotError('out of memory for a worker\'s stack', 4);
      const data = { mod, memory, stackTop: Math.floor((base + WORKER_STACK) / 16) * 16, idx: i };
      const w = isNode ? new WorkerClass(url, { workerData: data }) : new WorkerClass(url, { type: 'module' });
      if (!isNode) w.postMessage(data);
      this.#workers.push(w);
      started.push(new Promise((resolve, reject) => {
        const fail = (e) => reject(new WhisperknotError(`worker ${i} did not start: ${e?.message ?? e}`, 7));
        const onMessage = (m) => {
          const d = isNode ? m : m.data;
          if (d?.type === 'ready') {
            // a worker waiting in its slot keeps no Node.js process alive
            if (isNode) { w.off('message', onMessage); w.off('error', fail); w.unref(); }
            resolve();
          } else if (d?.type === 'error') fail(d.message);
        };
        if (isNode) { w.on('message', onMessage); w.on('error', fail); }
        else { w.addEventListener('message', onMessage); w.addEventListener('error', fail); }
      }));
    }
    try {
      await Promise.all(started);
      // each worker marks its slot idle as it enters wkw_worker_loop
      const until = Date.now() + 10000;
      while (x.wkw_idle_workers() < n) {
        if (Date.now() > until) throw new WhisperknotError(`${n - x.wkw_idle_workers()} of ${n} workers never reached their slots`, 7);
        await new Promise((r) => setTimeout(r, 1));
      }
    } catch (e) {
      this.close();
      throw e;
    }
    x.wkw_set_threads(n + 1);
  }

  // The threaded module's exports, each call checked for a worker that
  // trapped: its function never returns, so the engine's waits trap too
  // once whisperknot-thread.mjs has set wkw_failed (compat/pthread.h);
  // such a call, and every later one, throws rather than hang or go on
  // with the engine's state half changed.
  #broken = null;
  #guarded(x) {
    const flag = new Int32Array(x.memory.buffer, x.wkw_failed_flag(), 1);
    for (const [name, fn] of Object.entries(x)) {
      if (typeof fn !== 'function') continue;
      x[name] = (...args) => {
        if (this.#broken) throw new WhisperknotError(this.#broken, 7);
        try {
          return fn(...args);
        } catch (err) {
          if (Atomics.load(flag, 0) === 0) throw err;
          this.#broken = 'a worker thread of the engine trapped (a bug of whisperknot; the worker\'s console shows the trap): this instance cannot be used any more, create another';
          this.close();
          throw new WhisperknotError(this.#broken, 7);
        }
      };
    }
    return x;
  }

  /** Threads new streams compute on. */
  get threads() { return this.#workers.length + 1; }

  /** Ends this instance's use: frees the streams still open, ends the
   * workers of a threaded instance; later calls through it throw, and
   * Stream.free() and Model.free() do nothing. */
  close() {
    if (this.#closed) return;
    // an open stream holds the engine's thread pool, whose end joins its
    // threads: free the streams while the workers still run (those of a
    // broken instance are dropped: every wait of it would trap). A worker
    // that traps meanwhile breaks the instance, which closes it.
    for (const s of this.#streams) {
      if (this.#broken) break;
      try {
        s.free();
      } catch {
        // #broken is set: the rest are dropped
      }
    }
    this.#streams.clear();
    this.#closed = true;
    for (const w of this.#workers) w.terminate();
    this.#workers = [];
    if (!this.#broken) this.#x?.wkw_set_threads(1);
  }

  #closed = false;
  /** the streams not freed yet, which close() frees */
  #streams = new Set();

  // The exports, or why this instance cannot be used any more.
  #usable() {
    if (this.#broken) throw new WhisperknotError(this.#broken, 7);
    if (this.#closed) throw new WhisperknotError('this Whisperknot instance was closed (close()): create another', 6);
    return this.#x;
  }

  /** @internal whether close() ended this instance's use */
  get closed() { return this.#closed; }

  /** @internal Model.createStream and Stream.free keep the open streams */
  trackStream(stream, open) {
    if (open) this.#streams.add(stream);
    else this.#streams.delete(stream);
  }

  #wasi;
  #x = null;
  #scratch = 0; // 16 bytes of out-pointers
  #err = 0; // the engine's error messages
  #nextId = 1;
  #vadLoaded = false;
  /** the layout table of wk-web.c: struct sizes and offsets */
  #layout = null;

  constructor(wasi) {
    this.#wasi = wasi;
  }

  #init(x) {
    this.#x = x;
    this.#scratch = x.malloc(64);
    this.#err = x.malloc(1024);
    const p = x.wkw_layout();
    this.#layout = Array.from(new Int32Array(x.memory.buffer, p, 27));
  }

  #deflate(src, n, dst, cap, level) {
    const out = pako.deflate(unsharedView(this.u8, src, src + n), { level });
    if (out.length > cap) return -1;
    this.u8.set(out, dst);
    return out.length;
  }

  /** @internal the exports; throws once the instance is closed */
  get exports() { return this.#usable(); }
  /** @internal */ get u8() { return new Uint8Array(this.#x.memory.buffer); }
  /** @internal */ get dv() { return new DataView(this.#x.memory.buffer); }
  /** @internal */ get layout() { return this.#layout; }
  /** @internal */ get scratch() { return this.#scratch; }

  /** The name of the kernel set the engine runs ("wasm" or "ref"). */
  get kernels() { return this.cstr(this.#usable().wkw_kernels_name()); }

  /** Bytes of WebAssembly memory (it only grows). */
  get memoryBytes() { return this.#x.memory.buffer.byteLength; }

  /** @internal */
  cstr(ptr) {
    if (!ptr) return null;
    const u8 = this.u8;
    let end = ptr;
    while (u8[end]) end++;
    return decodeUtf8(u8, ptr, end);
  }

  /** @internal a copy of the NUL-terminated bytes at ptr (empty for 0) */
  cbytes(ptr) {
    const u8 = this.u8;
    let end = ptr;
    if (ptr) while (u8[end]) end++;
    return u8.slice(ptr, end);
  }

  /** @internal a NUL-terminated copy of s in wasm memory (free it) */
  allocStr(s) {
    const b = new TextEncoder().encode(s + '\0');
    const p = this.#x.malloc(b.length);
    if (!p) throw new WhisperknotError('out of memory', 4);
    this.u8.set(b, p);
    return p;
  }

  /** @internal */
  fail(status, withMessage) {
    const msg = withMessage ? this.cstr(this.#err) : '';
    throw new WhisperknotError(msg || this.cstr(this.#x.wk_status_str(status)), status);
  }

  /** @internal */ get errPtr() { return this.#err; }

  /**
   * Loads a knot (an ArrayBuffer, a typed array, a Response, a URL, or in
   * Node.js a file path).
   * @returns {Promise<Model>}
   */
  async loadModel(source) {
    this.#usable();
    const bytes = await readSource(source);
    // the engine's messages name the file: keep its name where it has one
    const name = typeof source === 'string' || source instanceof URL
      ? String(source instanceof URL ? source.pathname : source).split('/').pop() || 'model.knot'
      : 'model.knot';
    const x = this.#usable(); // closed while the bytes came
    const path = `${FS_ROOT}${this.#nextId++}/${name.replace(/[^\w.-]/g, '_')}`;
    this.#wasi.addFile(path, bytes);
    const p = this.allocStr(path);
    try {
      this.u8.fill(0, this.#err, this.#err + 1);
      const st = x.wk_model_load(p, 0, this.#scratch, this.#err, 1024);
      if (st !== 0) {
        this.#wasi.removeFile(path);
        this.fail(st, true);
      }
      this.#wasi.releaseData(path);
      return new Model(this, this.dv.getUint32(this.#scratch, true));
    } finally {
      x.free(p);
    }
  }

  /**
   * Loads the Silero VAD model the live policy needs (use_vad), from a
   * source as loadModel's (default: knots/vad in this source tree, or
   * silero-v6.2.0.knot next to this file).
   */
  async loadVad(source) {
    this.#usable();
    if (this.#vadLoaded && source === undefined) return;
    const bytes = source !== undefined ? await readSource(source)
      : await readSource(new URL(`../knots/vad/${VAD_FILE}`, import.meta.url))
        .catch(() => readSource(new URL(`./${VAD_FILE}`, import.meta.url)));
    this.#wasi.addFile(FS_ROOT + VAD_FILE, bytes);
    this.#vadLoaded = true;
  }

  /** @internal */ get vadLoaded() { return this.#vadLoaded; }

  /**
   * A WAV file's samples, mixed down to mono, by the engine's own reader
   * (tools/wav.c): PCM 8/16/24/32 bits or float 32/64. The samples are at
   * the file's rate, not resampled: feed() needs rate 16000 (the native
   * tools refuse other rates).
   * @returns {{samples: Float32Array, rate: number, channels: number}}
   */
  parseWav(bytes) {
    const x = this.#usable();
    const data = bytes instanceof ArrayBuffer ? new Uint8Array(bytes) : bytes;
    const p = x.malloc(data.byteLength || 1);
    if (!p) throw new WhisperknotError('out of memory', 4);
    try {
      this.u8.set(data, p);
      const st = x.wkw_wav_parse(p, data.byteLength, this.#scratch, this.#err, 1024);
      if (st !== 0) this.fail(st, true);
      const dv = this.dv;
      const sp = dv.getUint32(this.#scratch, true), n = dv.getUint32(this.#scratch + 4, true);
      const samples = new Float32Array(this.#x.memory.buffer, sp, n).slice();
      const rate = dv.getInt32(this.#scratch + 8, true), channels = dv.getInt32(this.#scratch + 12, true);
      x.free(sp);
      return { samples, rate, channels };
    } finally {
      x.free(p);
    }
  }
}

/** A loaded knot: immutable weights shared by its streams. */
export class Model {
  #wk;
  #ptr;

  constructor(wk, ptr) {
    this.#wk = wk;
    this.#ptr = ptr;
    const x = wk.exports, out = x.malloc(16 * 8);
    x.wkw_model_info(ptr, out);
    const v = Array.from(new Float64Array(x.memory.buffer, out, 13));
    x.free(out);
    /** wk_model_info */
    this.info = {
      nVocab: v[0], nMels: v[1], nAudioCtx: v[2], nAudioState: v[3], nAudioHead: v[4],
      nAudioLayer: v[5], nTextCtx: v[6], nTextState: v[7], nTextHead: v[8], nTextLayer: v[9],
      multilingual: v[10] !== 0, nParams: v[11], fileBytes: v[12],
    };
  }

  /** The Whisperknot instance the model belongs to (loadVad(),
   * close()). */
  get engine() { return this.#wk; }

  /** @internal */ get ptr() {
    if (!this.#ptr) throw new WhisperknotError('the model was freed', 6);
    return this.#ptr;
  }

  /**
   * A stream with wk_stream_params (unset fields keep the engine's
   * defaults).
   * @param {import('./whisperknot').StreamParams} [params]
   */
  createStream(params = {}) {
    const wk = this.#wk, x = wk.exports;
    const live = (params.latencyMs ?? 0) > 0;
    if (live && params.useVad !== false && !wk.vadLoaded)
      throw new WhisperknotError('the live policy with VAD needs the VAD model: call loadVad() first', 5);
    const int = (v, def = -1) => (v === undefined || v === null ? def : v | 0);
    const bool = (v) => (v === undefined ? -1 : v ? 1 : 0);
    const num = (v) => (v === undefined ? -1 : +v);
    const commit = params.commit === undefined ? -1 : params.commit === 'agreement' ? 1 : params.commit === 'deadline' ? 0 : int(params.commit);
    const lang = params.language ? wk.allocStr(params.language) : 0;
    try {
      wk.u8.fill(0, wk.errPtr, wk.errPtr + 1);
      const st = x.wkw_stream_new(this.ptr, lang, bool(params.translate), int(params.beamSize),
        int(params.latencyMs), bool(params.useVad), num(params.vadThreshold),
        int(params.vadMinSilenceMs), int(params.audioCtx, -3), commit, num(params.temperatureInc),
        bool(params.noTimestamps), bool(params.suppressBlank), bool(params.wordTimes),
        bool(params.textLines), 0, wk.scratch, wk.errPtr, 1024);
      if (st !== 0) wk.fail(st, true);
      const stream = new Stream(wk, wk.dv.getUint32(wk.scratch, true), lang);
      wk.trackStream(stream, true);
      return stream;
    } catch (e) {
      if (lang) x.free(lang);
      throw e;
    }
  }

  /** Drops this handle's reference (streams keep their own); nothing
   * once its instance is closed (cleanup code need not ask). */
  free() {
    if (this.#ptr && !this.#wk.closed) this.#wk.exports.wk_model_unref(this.#ptr);
    this.#ptr = 0;
  }
}

/** A recognition stream (wk_stream). */
export class Stream {
  #wk;
  #ptr;
  #lang;
  #buf = 0;
  #bufLen = 0;

  constructor(wk, ptr, lang) {
    this.#wk = wk;
    this.#ptr = ptr;
    this.#lang = lang; // the engine keeps the pointer: it lives as long
  }

  get #p() {
    if (!this.#ptr) throw new WhisperknotError('the stream was freed', 6);
    return this.#ptr;
  }

  #check(st) {
    if (st !== 0) this.#wk.fail(st, false);
  }

  /**
   * Appends mono 16 kHz samples in [-1, 1]. dueSeconds (optional): when the
   * first sample was captured, on Whisperknot.clockSeconds()'s clock (the
   * live policy's deadlines count from it; wk_stream_feed_at).
   */
  feed(samples, dueSeconds) {
    const wk = this.#wk, x = wk.exports, p = this.#p;
    if (!(samples instanceof Float32Array)) samples = Float32Array.from(samples);
    const chunk = 16000 * 4; // the staging buffer never grows past 4 s
    for (let off = 0; off < samples.length; off += chunk) {
      const part = samples.subarray(off, Math.min(samples.length, off + chunk));
      if (this.#bufLen < part.length) {
        if (this.#buf) x.free(this.#buf);
        this.#bufLen = Math.max(part.length, 1024);
        this.#buf = x.malloc(this.#bufLen * 4);
        if (!this.#buf) { this.#bufLen = 0; throw new WhisperknotError('out of memory', 4); }
      }
      new Float32Array(x.memory.buffer, this.#buf, part.length).set(part);
      if (dueSeconds === undefined)
        this.#check(x.wk_stream_feed(p, this.#buf, part.length));
      else
        this.#check(x.wk_stream_feed_at(p, this.#buf, part.length, dueSeconds + off / 16000));
    }
  }

  /** Transcribes what is buffered without ending the stream. */
  flush() { this.#check(this.#wk.exports.wk_stream_flush(this.#p)); }

  /** End of audio: transcribes the rest. */
  finish() { this.#check(this.#wk.exports.wk_stream_finish(this.#p)); }

  /** Forgets all audio and results. */
  reset() { this.#wk.exports.wk_stream_reset(this.#p); }

  #segments(n, arr) {
    const wk = this.#wk, dv = wk.dv, L = wk.layout, out = [];
    for (let i = 0; i < n; i++) {
      const s = arr + i * L[0];
      const tokens = [];
      const tp = dv.getUint32(s + L[4], true), nt = dv.getInt32(s + L[5], true);
      for (let j = 0; j < nt; j++) {
        const t = tp + j * L[10], text = dv.getUint32(t + L[15], true);
        tokens.push({
          id: dv.getInt32(t + L[11], true),
          p: dv.getFloat32(t + L[12], true),
          start: Number(dv.getBigInt64(t + L[13], true)),
          end: Number(dv.getBigInt64(t + L[14], true)),
          text: wk.cstr(text),
          // a token may hold part of a character (BPE splits UTF-8
          // sequences), which text shows as U+FFFD: joined bytes decode
          bytes: wk.cbytes(text),
        });
      }
      out.push({
        start: Number(dv.getBigInt64(s + L[1], true)),
        end: Number(dv.getBigInt64(s + L[2], true)),
        text: wk.cstr(dv.getUint32(s + L[3], true)) ?? '',
        tokens,
        avgLogprob: dv.getFloat32(s + L[6], true),
        noSpeechProb: dv.getFloat32(s + L[7], true),
        utteranceEnd: dv.getUint8(s + L[8]) !== 0,
        stability: dv.getFloat32(s + L[9], true),
        spaceBefore: dv.getUint8(s + L[16]) !== 0,
        p: dv.getFloat32(s + L[17], true),
      });
    }
    return out;
  }

  /** Segments completed since the last take (times in samples). */
  take() {
    const wk = this.#wk;
    const n = wk.exports.wk_stream_take(this.#p, wk.scratch);
    return this.#segments(n, wk.dv.getUint32(wk.scratch, true));
  }

  /**
   * The segments completed since the last take, shaped by the engine into
   * cues ready to show (wk_stream_take_cues): {kind: 'text' | 'gap' |
   * 'utterance-end', start, end, before, text, after, p}; before + text +
   * after is what to show (with textLines, its spaces and newlines).
   * Replaces take() for a caller that shows text.
   */
  takeCues() {
    const wk = this.#wk, L = wk.layout, out = [];
    const n = wk.exports.wk_stream_take_cues(this.#p, wk.scratch);
    const dv = wk.dv, arr = dv.getUint32(wk.scratch, true);
    for (let i = 0; i < n; i++) {
      const c = arr + i * L[18];
      out.push({
        kind: CUE_KINDS[dv.getInt32(c + L[19], true)],
        start: Number(dv.getBigInt64(c + L[20], true)),
        end: Number(dv.getBigInt64(c + L[21], true)),
        before: wk.cstr(dv.getUint32(c + L[22], true)) ?? '',
        text: wk.cstr(dv.getUint32(c + L[23], true)) ?? '',
        after: wk.cstr(dv.getUint32(c + L[24], true)) ?? '',
        p: dv.getFloat64(c + L[25], true),
      });
    }
    return out;
  }

  /** Live policy: the words not yet committed (not consumed). */
  partial() {
    const wk = this.#wk;
    const n = wk.exports.wk_stream_partial(this.#p, wk.scratch, wk.scratch + 8);
    const segs = this.#segments(n, wk.dv.getUint32(wk.scratch, true));
    segs.serial = Number(wk.dv.getBigUint64(wk.scratch + 8, true));
    return segs;
  }

  /** The detected or configured language code, or null. */
  get language() { return this.#wk.cstr(this.#wk.exports.wk_stream_language(this.#p)); }

  /** wk_stream_stats (seconds, counts, bytes). */
  stats() {
    const x = this.#wk.exports;
    const tmp = x.malloc(28 * 8);
    if (!tmp) throw new WhisperknotError('out of memory', 4);
    x.wkw_stream_stats(this.#p, tmp);
    const v = Array.from(new Float64Array(x.memory.buffer, tmp, 28));
    x.free(tmp);
    const names = ['audioSeconds', 'melSeconds', 'encoderSeconds', 'decoderSeconds', 'nWindows',
      'nTokens', 'stateBytes', 'nRuns', 'vadSeconds', 'speechSeconds', 'stepSeconds',
      'lastRunSeconds', 'maxRunSeconds', 'lastDelaySeconds', 'maxDelaySeconds', 'nCommitted',
      'nUtterances', 'nClipped', 'nZeroed', 'nDeadlineCommits', 'nLate', 'maxLateSeconds',
      'runEstimateSeconds', 'alignSeconds', 'nAligned', 'nSharedSteps', 'nSlowRuns',
      'nWithheld'];
    return Object.fromEntries(names.map((k, i) => [k, v[i]]));
  }

  /** Frees the stream and its buffers; nothing once its instance is
   * closed (close() freed it). */
  free() {
    const wk = this.#wk;
    if (wk.closed) return;
    const x = wk.exports;
    if (this.#ptr) x.wk_stream_free(this.#ptr);
    if (this.#buf) x.free(this.#buf);
    if (this.#lang) x.free(this.#lang);
    this.#ptr = this.#buf = this.#lang = 0;
    this.#bufLen = 0;
    wk.trackStream(this, false);
  }
}

/** Loads a model on a new engine instance, Whisperknot.create(opts): it is
 * the model's engine (for loadVad() and close()). */
export async function loadModel(source, opts) {
  const wk = await Whisperknot.create(opts);
  return wk.loadModel(source);
}

export const statusNames = STATUS;
