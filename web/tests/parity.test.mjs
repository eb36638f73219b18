// The WebAssembly engine gives the native engine's tokens: greedy decoding
// (beam 1, and beam search) of examples/data/sample.wav and jfk.wav with the default model,
// and of sample.wav with random-weight test models (f16 and q8_0, made by
// wk-make-test-model + whisperknot-convert as tests/meson.build does).
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Whisperknot } from '../whisperknot.mjs';
import { defaultModel, jfkWav, kedWav, nativeTool, sampleWav, sharedData } from './helpers.mjs';

const transcribe = nativeTool('tools/whisperknot-transcribe');

function nativeSegments(model, wav, env = {}, beam = 1) {
  const out = execFileSync(transcribe, ['-m', model, '-b', String(beam), '-t', '1', '-f', 'json', '--tokens', wav],
    { encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, ...env } });
  return JSON.parse(out).segments.map((s) => ({ text: s.text, ids: s.tokens.map((t) => t.id) }));
}

let wk, wkRef;
async function wasmSegments(model, wav, ref = false, beam = 1) {
  const m = await (ref ? wkRef : wk).loadModel(model);
  const { samples } = (ref ? wkRef : wk).parseWav(readFileSync(wav));
  const s = m.createStream({ beamSize: beam });
  const segs = [];
  // 1 s per feed, as whisperknot-transcribe
  for (let p = 0; p < samples.length; p += 16000) {
    s.feed(samples.subarray(p, p + 16000));
    segs.push(...s.take());
  }
  s.finish();
  segs.push(...s.take());
  s.free();
  m.free();
  return segs.map((g) => ({ text: g.text.trim(), ids: g.tokens.map((t) => t.id) }))
    .filter((g) => g.text !== '' || g.ids.length);
}

before(async () => {
  wk = await Whisperknot.create();
  // the portable reference kernels, as WK_KERNELS=ref natively
  wkRef = await Whisperknot.create({ env: { WK_KERNELS: 'ref' } });
});

const skip = transcribe ? false : 'no native build (set WK_NATIVE_BUILD)';

// The command-line check: web/transcribe.mjs (greedy by default) prints
// what whisperknot-transcribe -b 1 prints for the same file. The file is
// festival's reading of a verse, which the default model decodes the same
// with every native kernel set. Not sample.wav: the step 19042 model is
// unsure of that voice, its greedy text falls back to sampling, and the
// native AVX-512, AVX2 and reference kernels already print three different
// texts for it (sample.wav is compared below where they agree).
test('node web/transcribe.mjs prints the text of whisperknot-transcribe -b 1', { skip }, () => {
  const here = path.dirname(new URL(import.meta.url).pathname);
  const js = execFileSync(process.execPath, [path.join(here, '..', 'transcribe.mjs'), defaultModel, kedWav],
    { encoding: 'utf8', maxBuffer: 1 << 24, env: process.env });
  const native = execFileSync(transcribe, ['-m', defaultModel, '-b', '1', '-t', '1', kedWav],
    { encoding: 'utf8', maxBuffer: 1 << 24, stdio: ['ignore', 'pipe', 'ignore'] });
  assert.ok(native.trim().length > 0);
  assert.equal(js, native);
});

// Stream.takeCues reads wk_cue through wkw_layout: the festival verse's
// cues (text, times) as whisperknot-transcribe -b 1 writes them in SubRip.
test('Stream.takeCues gives the cues of whisperknot-transcribe -f srt', { skip }, async () => {
  const native = execFileSync(transcribe, ['-m', defaultModel, '-b', '1', '-t', '1', '-f', 'srt', kedWav],
    { encoding: 'utf8', maxBuffer: 1 << 24, stdio: ['ignore', 'pipe', 'ignore'] });
  const m = await wk.loadModel(defaultModel);
  const { samples } = wk.parseWav(readFileSync(kedWav));
  const s = m.createStream({ beamSize: 1 });
  const cues = [];
  for (let p = 0; p < samples.length; p += 16000) {
    s.feed(samples.subarray(p, p + 16000));
    cues.push(...s.takeCues());
  }
  s.finish();
  cues.push(...s.takeCues());
  s.free();
  m.free();
  const ms = (t) => {
    const v = Math.floor(t * 1000 / 16000), pad = (x, n) => String(x).padStart(n, '0');
    return `${pad(Math.floor(v / 3600000), 2)}:${pad(Math.floor(v / 60000) % 60, 2)}:` +
      `${pad(Math.floor(v / 1000) % 60, 2)},${pad(v % 1000, 3)}`;
  };
  const text = cues.filter((c) => c.kind === 'text');
  assert.ok(text.length > 0);
  // the cues cover the audio in order, gaps and text alike
  for (let i = 1; i < cues.length; i++) assert.ok(cues[i].start >= cues[i - 1].end);
  assert.ok(text.every((c) => c.before === '' && c.after === '' && c.p > 0 && c.p <= 1));
  assert.equal(text.map((c, i) => `${i + 1}\n${ms(c.start)} --> ${ms(c.end)}\n${c.text}\n\n`).join(''), native);
});

// The wasm tokens are held to the native ones on the segments where the
// native SIMD and reference kernels agree. Where they do not (a model
// unsure of the audio: its greedy tokens hang on near-ties, and a
// temperature fallback samples), the test says so and checks that the
// wasm engine still transcribes the whole file.
async function agreeWhereNativeAgrees(t, wav) {
  const native = nativeSegments(defaultModel, wav);
  const ref = nativeSegments(defaultModel, wav, { WK_KERNELS: 'ref' });
  assert.ok(native.length > 0);
  const wasm = await wasmSegments(defaultModel, wav);
  let agree = 0;
  while (agree < native.length && agree < ref.length
    && JSON.stringify(native[agree]) === JSON.stringify(ref[agree])) agree++;
  assert.deepEqual(wasm.slice(0, agree), native.slice(0, agree));
  if (agree < native.length)
    t.diagnostic(`native ref and SIMD kernels agree on ${agree} of ${native.length} segments; ` +
      `wasm compared on those (wasm: ${JSON.stringify(wasm.map((g) => g.text).join(' '))})`);
  assert.ok(wasm.length > 0 && wasm.at(-1).ids.length > 0, 'wasm transcribed the file');
  return agree === native.length;
}

test('default model, festival verse: the native tokens', { skip }, async (t) => {
  assert.ok(await agreeWhereNativeAgrees(t, kedWav), 'native kernel sets agree on the whole file');
});

test('default model, sample.wav: the native tokens where native kernels agree', { skip }, async (t) => {
  await agreeWhereNativeAgrees(t, sampleWav);
});

// Beam search keeps five near-equal hypotheses, so last-bit differences
// (the wasm FFT against kissfft, summation order) can pick another beam:
// on the step 15975 model even native's AVX2 and reference kernels part
// ways at sample.wav's second segment, and wasm at its first. Reported as
// a todo rather than hidden; greedy parity (above) is the check.
test('default model, sample.wav, beam search (5): the native tokens',
  { skip, todo: 'beam search turns last-bit differences into another beam (see above)' }, async () => {
  const native = nativeSegments(defaultModel, sampleWav, {}, 5);
  assert.ok(native.length > 0);
  assert.deepEqual(await wasmSegments(defaultModel, sampleWav, false, 5), native);
});

// jfk.wav is real speech the default model is unsure of.
test('default model, jfk.wav: the native tokens where native kernels agree',
  { skip: skip || (!existsSync(jfkWav) && 'no jfk.wav') }, async (t) => {
    await agreeWhereNativeAgrees(t, jfkWav);
  });

const makeModel = nativeTool('tools/wk-make-test-model');
const convert = nativeTool('knots/whisperknot-convert');
const vocab = path.join(sharedData, 'for-tests-ggml-tiny.en.bin');
const rskip = skip || ((!makeModel || !convert || !existsSync(vocab)) && 'no model generator or vocabulary');

// Random weights give flat distributions (a token's p ~ 1e-4): a tie
// breaks differently under another summation order. The reference kernels
// (double sums) must agree exactly, wasm and native: that holds the whole
// port (loader, mel and FFT, decoding, the compat layer) but the SIMD
// kernels. The SIMD kernels are compared too; on the q4_0 model the first
// token is such a tie that the wasm kernels' f32 sums have decided it both
// ways between builds (once against AVX2 and the reference; with the
// reference encoder they agreed): reported as a todo rather than hidden.
const knots = {};
async function randomKnot(type) {
  if (knots[type]) return knots[type];
  const dir = mkdtempSync(path.join(os.tmpdir(), 'wk-web-parity-'));
  const bin = path.join(dir, 'rnd.bin'), knot = path.join(dir, `rnd-${type}.knot`);
  execFileSync(makeModel, ['--vocab', vocab, bin], { stdio: 'ignore' });
  execFileSync(convert, ['--quiet', '--type', type, bin, knot], { stdio: 'ignore' });
  return (knots[type] = knot);
}

for (const type of ['f16', 'q8_0', 'q4_0']) {
  test(`random test model (${type}), sample.wav, reference kernels: the native reference tokens`, { skip: rskip }, async () => {
    const knot = await randomKnot(type);
    const native = nativeSegments(knot, sampleWav, { WK_KERNELS: 'ref' });
    assert.ok(native.some((s) => s.ids.length > 0), 'the random model says something');
    assert.deepEqual(await wasmSegments(knot, sampleWav, true), native);
  });
  test(`random test model (${type}), sample.wav, SIMD kernels: the native tokens`,
    { skip: rskip, todo: type === 'q4_0' && 'a near-tie that summation order decides (see above)' }, async () => {
      const knot = await randomKnot(type);
      const native = nativeSegments(knot, sampleWav);
      assert.deepEqual(await wasmSegments(knot, sampleWav), native);
    });
}
