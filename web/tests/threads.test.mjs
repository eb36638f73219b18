// The threaded module (whisperknot-threads.wasm, Whisperknot.create({
// threads })): the same segments and tokens as the single-threaded module
// on every thread count (the thread pool never changes a result), streams
// side by side on its workers, a live stream through the scheduler, and
// clear errors where threads cannot run. Each test has a timeout: a
// deadlock fails instead of hanging CI.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Whisperknot, WhisperknotError } from '../whisperknot.mjs';
import { decodeFile, defaultModel, jfkWav, sampleWav } from './helpers.mjs';

const TIMEOUT = 300000;
let one, three;

before(async () => {
  // the SIMD128 module, whose kernel set the threaded one is built with
  // (not the relaxed module, which the runtime may offer)
  one = await Whisperknot.create({ relaxedSimd: false });
  three = await Whisperknot.create({ threads: 3, relaxedSimd: false });
});

async function segments(wk, wav, beam, model) {
  const out = await decodeFile(wk, model ?? defaultModel, wav, beam);
  return out.map((g) => ({ text: g.text, start: g.start, end: g.end, ids: g.tokens.map((t) => t.id), p: g.tokens.map((t) => t.p) }));
}

test('three threads: the instance has two workers and the threaded module', { timeout: TIMEOUT }, () => {
  assert.equal(one.threads, 1);
  assert.equal(three.threads, 3);
  assert.equal(three.kernels, one.kernels);
});

for (const [name, wav] of [['sample.wav', sampleWav], ['jfk.wav', jfkWav]]) {
  for (const beam of [1, 5]) {
    test(`default model, ${name}, beam ${beam}: three threads give one thread's segments, bit for bit`,
      { timeout: TIMEOUT, skip: !existsSync(wav) && `no ${wav}` }, async () => {
        const a = await segments(one, wav, beam);
        assert.ok(a.length > 0 && a.some((g) => g.ids.length > 0));
        assert.deepEqual(await segments(three, wav, beam), a);
      });
  }
}

// A token's text may be part of a UTF-8 sequence (whisperknot.h: BPE
// splits characters), so a segment's text is rebuilt from its tokens'
// bytes: joined they decode to the engine's text of the segment, before
// it trims the ASCII white space around it (space_before: a leading one).
test('default model, sample.wav: the bytes of a segment\'s tokens decode to its text', { timeout: TIMEOUT }, async () => {
  const segs = await decodeFile(one, defaultModel, sampleWav, 1);
  assert.ok(segs.some((g) => g.tokens.length > 0));
  for (const g of segs) {
    assert.ok(g.tokens.every((t) => t.bytes instanceof Uint8Array && t.bytes.length > 0));
    const text = new TextDecoder().decode(Buffer.concat(g.tokens.map((t) => t.bytes)));
    assert.equal(text.replace(/^[ \t\n\r\v\f]+|[ \t\n\r\v\f]+$/g, ''), g.text);
    assert.equal(/^[ \t\n\r\v\f]/.test(text), g.spaceBefore, g.text);
  }
});

test('two streams at once on the threaded instance: each as alone', { timeout: TIMEOUT }, async () => {
  const m = await three.loadModel(defaultModel);
  const { samples } = three.parseWav(readFileSync(sampleWav));
  const alone = await segments(three, sampleWav, 1, m);
  const s1 = m.createStream({ beamSize: 1 }), s2 = m.createStream({ beamSize: 1 });
  const o1 = [], o2 = [];
  for (let p = 0; p < samples.length; p += 16000) {
    s1.feed(samples.subarray(p, p + 16000)); o1.push(...s1.take());
    s2.feed(samples.subarray(p, p + 16000)); o2.push(...s2.take());
  }
  s1.finish(); o1.push(...s1.take());
  s2.finish(); o2.push(...s2.take());
  s1.free(); s2.free();
  const ids = (o) => o.map((g) => g.tokens.map((t) => t.id));
  assert.deepEqual(ids(o1), alone.map((g) => g.ids));
  assert.deepEqual(ids(o2), alone.map((g) => g.ids));
  m.free();
});

test('a live stream on three threads commits the words of sample.wav', { timeout: TIMEOUT }, async () => {
  const m = await three.loadModel(defaultModel);
  await three.loadVad();
  const { samples } = three.parseWav(readFileSync(sampleWav));
  const s = m.createStream({ latencyMs: 1000 });
  const words = [];
  for (let p = 0; p < samples.length; p += 1600) {
    s.feed(samples.subarray(p, p + 1600));
    words.push(...s.take());
  }
  s.finish();
  words.push(...s.take());
  s.free();
  m.free();
  // live words of the three sentences (the live policy hears the first
  // word otherwise than a whole window does)
  const text = words.map((w) => w.text).join(' ');
  assert.ok(words.length >= 20, text);
  assert.match(text, /height.*famous.*spent/s, text);
});

test('threads that cannot run are errors, not hangs', { timeout: TIMEOUT }, async () => {
  for (const threads of [0, 1.5, 18, -1]) {
    await assert.rejects(Whisperknot.create({ threads }), (e) => e instanceof WhisperknotError && /threads must be/.test(e.message), String(threads));
  }
  // the single-threaded module cannot run threads
  const single = readFileSync(new URL('../whisperknot.wasm', import.meta.url));
  await assert.rejects(Whisperknot.create({ threads: 2, wasm: single }),
    (e) => e instanceof WhisperknotError && /whisperknot-threads\.wasm/.test(e.message));
  // a truncated knot: the engine's clear error, from the threaded module too
  const knot = readFileSync(defaultModel);
  await assert.rejects(three.loadModel(knot.subarray(0, knot.length >> 1)),
    (e) => e instanceof WhisperknotError && e.message.length > 0);
});

// A shared memory reserves its maximum when it is made; a 32-bit browser
// refuses 2 GiB (RangeError), simulated here: create() asks for 1 GiB and
// the engine runs on it; refused everything, create() throws the engine's
// error type rather than a RangeError.
test('a browser that cannot reserve 2 GiB: a smaller shared memory, the same segments', { timeout: TIMEOUT }, async () => {
  const Real = WebAssembly.Memory;
  const asked = [];
  let limit = 16384;
  WebAssembly.Memory = function Memory(d) {
    if (d?.shared) asked.push(d.maximum);
    if (d?.shared && d.maximum > limit) throw new RangeError('WebAssembly.Memory(): could not allocate memory');
    return new Real(d);
  };
  let wk;
  try {
    wk = await Whisperknot.create({ threads: 2, relaxedSimd: false });
    limit = 0;
    await assert.rejects(Whisperknot.create({ threads: 2, relaxedSimd: false }),
      (e) => e instanceof WhisperknotError && /cannot reserve/.test(e.message));
  } finally {
    WebAssembly.Memory = Real;
  }
  assert.deepEqual(asked, [32768, 16384, 32768, 16384, 8192]);
  assert.equal(wk.threads, 2);
  assert.deepEqual(await segments(wk, sampleWav, 1), await segments(one, sampleWav, 1));
  wk.close();
});

// A stream holds the engine's thread pool, whose end joins the pool's
// threads: close() used to end the workers first, and a stream freed
// after it then waited forever for them. That wait blocks its thread, so
// no timer of this process could end it: the steps run in a child
// process, killed if it hangs.
test('close() with a stream open: the stream and model free afterwards, later calls throw', { timeout: TIMEOUT }, async () => {
  // a file, not --eval: the workers would inherit --input-type
  const dir = mkdtempSync(path.join(tmpdir(), 'wk-close-')), file = path.join(dir, 'close.mjs');
  writeFileSync(file, `
    import { readFileSync } from 'node:fs';
    import { Whisperknot } from ${JSON.stringify(new URL('../whisperknot.mjs', import.meta.url).href)};
    const wk = await Whisperknot.create({ threads: 2, relaxedSimd: false });
    const m = await wk.loadModel(${JSON.stringify(defaultModel)});
    const s = m.createStream({ beamSize: 1 });
    s.feed(wk.parseWav(readFileSync(${JSON.stringify(sampleWav)})).samples.subarray(0, 16000 * 3));
    s.flush();
    wk.close();
    s.free();
    m.free();
    wk.close();
    const err = (f) => { try { f(); return null; } catch (e) { return { name: e.name, status: e.status, message: e.message }; } };
    console.log(JSON.stringify({ threads: wk.threads, create: err(() => m.createStream()), feed: err(() => s.feed(new Float32Array(16))) }));
  `);
  const child = spawn(process.execPath, [file], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  child.stdout.on('data', (d) => { out += d; });
  child.stderr.on('data', (d) => { err += d; });
  const timer = setTimeout(() => child.kill('SIGKILL'), 120000);
  const [code, signal] = await new Promise((resolve) => child.on('exit', (c, s) => resolve([c, s])));
  clearTimeout(timer);
  rmSync(dir, { recursive: true });
  assert.equal(signal, null, `the child hung (killed after 120 s): close() then free() never returned\n${err}`);
  assert.equal(code, 0, out + err);
  const r = JSON.parse(out);
  assert.equal(r.threads, 1);
  for (const e of [r.create, r.feed]) {
    assert.equal(e?.name, 'WhisperknotError', JSON.stringify(e));
    assert.equal(e.status, 6);
    assert.match(e.message, /closed/);
  }

  // a single-threaded instance: close() frees what is open and ends its use
  const wk = await Whisperknot.create({ relaxedSimd: false });
  const m = await wk.loadModel(defaultModel);
  const s = m.createStream({ beamSize: 1 });
  s.feed(new Float32Array(16000));
  wk.close();
  s.free();
  m.free();
  const closed = (e) => e instanceof WhisperknotError && e.status === 6 && /closed/.test(e.message);
  assert.throws(() => m.createStream(), closed);
  assert.throws(() => s.take(), closed);
  assert.throws(() => wk.parseWav(readFileSync(sampleWav)), closed);
  await assert.rejects(wk.loadModel(defaultModel), closed);
});

// A worker that traps (a bug of the engine) never finishes its function,
// and the threads waiting for it used to wait forever. Its script sets the
// module's failure flag (wkw_failed_flag) and says so on its console;
// every wait then traps, and the instance throws WhisperknotError from
// then on instead of hanging.
test('a worker that traps: its script sets the failure flag and reports it', { timeout: TIMEOUT }, async () => {
  const { Worker } = await import('node:worker_threads');
  const str = (s) => [s.length, ...Buffer.from(s)];
  // a module with the worker's imports and exports whose wkw_worker_loop
  // is `unreachable` and whose flag is at address 64
  const bytes = new Uint8Array([0, 0x61, 0x73, 0x6d, 1, 0, 0, 0,
    1, 9, 2, 0x60, 1, 0x7f, 0, 0x60, 0, 1, 0x7f, // types (i32)->(), ()->i32
    2, 16, 1, ...str('env'), ...str('memory'), 2, 3, 1, 1, // shared memory, 1 page
    3, 4, 3, 0, 0, 1, // functions
    7, 53, 3, ...str('wkw_set_stack'), 0, 0, ...str('wkw_worker_loop'), 0, 1, ...str('wkw_failed_flag'), 0, 2,
    10, 14, 3, 2, 0, 0x0b, 3, 0, 0x00, 0x0b, 5, 0, 0x41, 0xc0, 0, 0x0b]);
  const mod = await WebAssembly.compile(bytes);
  const memory = new WebAssembly.Memory({ initial: 1, maximum: 1, shared: true });
  const w = new Worker(new URL('../whisperknot-thread.mjs', import.meta.url),
    { workerData: { mod, memory, stackTop: 0, idx: 3 }, stderr: true });
  let err = '';
  w.stderr.on('data', (d) => { err += d; });
  await new Promise((resolve, reject) => { w.on('exit', resolve); w.on('error', reject); });
  assert.equal(new Int32Array(memory.buffer)[16], 1, 'the flag is set');
  assert.match(err, /worker 3 trapped.*unreachable/s);
});

test('a worker that traps: the instance throws WhisperknotError, now and after, instead of hanging', { timeout: TIMEOUT }, async () => {
  const wk = await Whisperknot.create({ threads: 2 });
  const m = await wk.loadModel(defaultModel);
  const { samples } = wk.parseWav(readFileSync(sampleWav));
  const s = m.createStream({ beamSize: 1 });
  // what the worker's script does when its call traps (the test above):
  // the workers then trap at their next wait, as if they had failed. The
  // caller computes every task no worker takes, so the file may still be
  // transcribed; at the latest the last stream's end, which waits for
  // the pool's threads to finish, meets a thread that never will.
  const x = wk.exports;
  Atomics.store(new Int32Array(x.memory.buffer, x.wkw_failed_flag(), 1), 0, 1);
  const trapped = (e) => e instanceof WhisperknotError && /worker thread of the engine trapped/.test(e.message);
  let threw = null;
  try {
    s.feed(samples);
    s.finish();
    s.take();
    s.free();
  } catch (e) {
    threw = e;
  }
  assert.ok(trapped(threw), String(threw));
  assert.throws(() => m.createStream(), trapped);
  // the broken instance closed itself: freeing is then nothing to do
  // (cleanup in a finally block must not throw)
  m.free();
  s.free();
  wk.close();
});
