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
import { decodeFile, defaultModel, jfkWav, kedWav, nativeTool, sampleWav, sharedData } from './helpers.mjs';

const transcribe = nativeTool('tools/whisperknot-transcribe');

function nativeSegments(model, wav, env = {}, beam = 1) {
  const out = execFileSync(transcribe, ['-m', model, '-b', String(beam), '-t', '1', '-f', 'json', '--tokens', wav],
    { encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, ...env } });
  return JSON.parse(out).segments.map((s) => ({ text: s.text, ids: s.tokens.map((t) => t.id) }));
}

let wk, wkRef, wkF32;
// ref: true (the reference kernels), false (the widest), or an instance
async function wasmSegments(model, wav, ref = false, beam = 1) {
  const inst = typeof ref === 'object' ? ref : ref ? wkRef : wk;
  const segs = await decodeFile(inst, model, wav, beam);
  return segs.map((g) => ({ text: g.text.trim(), ids: g.tokens.map((t) => t.id) }))
    .filter((g) => g.text !== '' || g.ids.length);
}

before(async () => {
  wk = await Whisperknot.create();
  // the portable reference kernels, as WK_KERNELS=ref natively
  wkRef = await Whisperknot.create({ env: { WK_KERNELS: 'ref' } });
  // f32 activations in the decoder, as WK_INT8=0 natively
  wkF32 = await Whisperknot.create({ env: { WK_INT8: '0' } });
});

const skip = transcribe ? false : 'no native build (set WK_NATIVE_BUILD)';

// The command-line check: web/transcribe.mjs (greedy by default) prints
// what whisperknot-transcribe -b 1 prints for the same file, festival's
// reading of a verse. This holds the front ends' plumbing (options, the
// cue layout, the line ends), so it runs where every kernel set computes
// the same decoding: f32 decoder activations (WK_INT8=0, logits within
// about 1e-4 between sets) and no temperature fallback (--no-fallback:
// what greedy decoding writes, not a sample). With the int8 activations
// of the default settings a model unsure of the voice can part kernel
// sets on near-ties (a candidate of 2026-12-04: native AVX-512 and AVX2
// against native ref and wasm, one comma); the tests below hold the
// default model to them at those settings too.
const plumbing = { WK_INT8: '0', WK_KERNELS: '' };
// whisperknot-transcribe -b 1 and web/transcribe.mjs on the default model,
// each with the WK_* variables of env and any further options
function transcribeJs(wav, env, opts = []) {
  const here = path.dirname(new URL(import.meta.url).pathname);
  return execFileSync(process.execPath, [path.join(here, '..', 'transcribe.mjs'), ...opts, defaultModel, wav],
    { encoding: 'utf8', maxBuffer: 1 << 24, env: { ...process.env, ...env } });
}
function transcribeNative(wav, env, opts = []) {
  return execFileSync(transcribe, ['-m', defaultModel, '-b', '1', '-t', '1', ...opts, wav],
    { encoding: 'utf8', maxBuffer: 1 << 24, stdio: ['ignore', 'pipe', 'ignore'], env: { ...process.env, ...env } });
}

test('node web/transcribe.mjs prints the text of whisperknot-transcribe -b 1', { skip }, () => {
  const native = transcribeNative(kedWav, plumbing, ['--no-fallback']);
  assert.ok(native.trim().length > 0);
  assert.equal(transcribeJs(kedWav, plumbing, ['--no-fallback']), native);
});

// The same check on sample.wav and jfk.wav, where the step 19042 model is
// unsure enough that greedy windows fall back to sampling (avg_logprob
// -1.04 against the -1.0 threshold on sample.wav). The front ends must
// print one text whatever kernels run them: native ref, AVX2 and AVX-512
// (a set the CPU lacks falls back to the widest it has) and wasm's own
// and reference kernels. With f32 activations (WK_INT8=0), where every
// kernel set's logits agree to about 1e-4, that holds token for token:
// it failed while the fallback sampled by inverse CDF over the
// vocabulary, whose running sum let rounding pick among tail tokens.
const unsureWavs = { 'sample.wav': sampleWav, 'jfk.wav': existsSync(jfkWav) ? jfkWav : null };
for (const [name, wav] of Object.entries(unsureWavs)) {
  test(`${name}, f32 activations: transcribe.mjs and whisperknot-transcribe -b 1 print one text on every kernel set`,
    { skip: skip || (!wav && `no ${name}`) }, () => {
      const f32 = { WK_INT8: '0' };
      const want = transcribeNative(wav, { ...f32, WK_KERNELS: '' });
      assert.ok(want.trim().length > 0);
      for (const k of ['ref', 'avx2', 'avx512'])
        assert.equal(transcribeNative(wav, { ...f32, WK_KERNELS: k }), want, `native ${k}`);
      assert.equal(transcribeJs(wav, { ...f32, WK_KERNELS: '' }), want, 'wasm');
      assert.equal(transcribeJs(wav, { ...f32, WK_KERNELS: 'ref' }), want, 'wasm ref');
    });
  // Issue 19's check, at the default settings. The decoder's q8_0 products
  // quantize their activations to int8: rounding x / d to an integer turns
  // last-bit differences between kernel sets into steps of max|x| / 127,
  // which flip this model's greedy near-ties (gaps of 0.0004-0.03). Until
  // 2026-12-05 native AVX-512 parted from AVX2, the reference kernels and
  // wasm on sample.wav ("... a dog's key, I hit-and-thirty it." against
  // "... a dog's key. / I have spent in it."): its one-query attention
  // summed in another order. It now sums in the AVX2 set's order
  // (test-kernels' test_x86_attention_sets_agree), so the x86 sets decode
  // alike, and wasm (its own sums: four lanes, no fused multiply-add)
  // prints the same text on both files with the default model of
  // 2026-12-04. Not bit for bit: a model with nearer ties could part wasm
  // from x86 again, and this test would say so. Native's encoder is
  // compared on its f32 weight panels (WK_INT8=dec), the arithmetic wasm
  // has and native's default on every CPU without AVX-512 VNNI; with
  // VNNI native's default encoder takes integer products for q8_0 weights
  // (activations rounded to int8), which part near-ties of their own
  // (sample.wav, greedy: "... such a dog's key. / I have spent in it."
  // against "... so farst thee, I have entered yet.").
  test(`${name}, default settings: transcribe.mjs prints the text of whisperknot-transcribe -b 1`,
    { skip: skip || (!wav && `no ${name}`) }, () => {
      assert.equal(transcribeJs(wav, { WK_INT8: '', WK_KERNELS: '' }), transcribeNative(wav, { WK_INT8: 'dec', WK_KERNELS: '' }));
    });
}

// Stream.takeCues reads wk_cue through wkw_layout: the festival verse's
// cues (text, times) as whisperknot-transcribe -b 1 writes them in SubRip,
// both decoding alike on every kernel set (plumbing, above).
test('Stream.takeCues gives the cues of whisperknot-transcribe -f srt', { skip }, async () => {
  const native = transcribeNative(kedWav, plumbing, ['--no-fallback', '-f', 'srt']);
  const m = await wkF32.loadModel(defaultModel);
  const { samples } = wkF32.parseWav(readFileSync(kedWav));
  const s = m.createStream({ beamSize: 1, temperatureInc: 0 });
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
// wasm engine still transcribes the whole file. f32: both sides with f32
// activations in the decoder (WK_INT8=0).
async function agreeWhereNativeAgrees(t, wav, f32 = false) {
  const env = f32 ? { WK_INT8: '0' } : {};
  const native = nativeSegments(defaultModel, wav, env);
  const ref = nativeSegments(defaultModel, wav, { ...env, WK_KERNELS: 'ref' });
  assert.ok(native.length > 0);
  const wasm = await wasmSegments(defaultModel, wav, f32 ? wkF32 : false);
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

// The verse at the default settings (int8 decoder activations): a
// candidate of 2026-12-04 parted the sets by one comma on a near-tie (see
// above), so this was a todo; the default model of 2026-12-04 decoded it
// alike on every set with kissfft's log-mel. With engine/fft.c's (every
// build's since 2026-12-06) native AVX2 reads "... in you Sir, where the
// wrongans were, and the cleanseman ..." where native ref reads "... in
// user price, where the wrongans were in black and the clean off of them
// ...": a todo again, reported, not counted. With f32 activations (below)
// every set agrees, and the relaxed module gives native AVX2's tokens
// bit for bit (relaxed.test.mjs).
test('default model, festival verse: the native tokens', {
  skip, todo: 'native ref and AVX2 part on a near-tie of the verse (int8 activations)',
}, async (t) => {
  assert.ok(await agreeWhereNativeAgrees(t, kedWav), 'native kernel sets agree on the whole file');
});

test('default model, festival verse, f32 activations: the native tokens', { skip }, async (t) => {
  assert.ok(await agreeWhereNativeAgrees(t, kedWav, true), 'native kernel sets agree on the whole file');
});

// sample.wav and jfk.wav with the default int8 activations: native ref and
// SIMD kernels parted at the first segment, so nothing was compared; when
// they happen to agree, wasm's own int8 rounding still parts (see the
// command-line checks above). With f32 activations every set agrees on
// every token, and wasm is held to all of them.
test('default model, sample.wav, f32 activations: the native tokens', { skip }, async (t) => {
  assert.ok(await agreeWhereNativeAgrees(t, sampleWav, true), 'native kernel sets agree on the whole file');
});

// Beam search keeps five near-equal hypotheses, so last-bit differences
// (summation order; before 2026-12-06 also the wasm FFT against kissfft)
// can pick another beam:
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
test('default model, jfk.wav, f32 activations: the native tokens',
  { skip: skip || (!existsSync(jfkWav) && 'no jfk.wav') }, async (t) => {
    assert.ok(await agreeWhereNativeAgrees(t, jfkWav, true), 'native kernel sets agree on the whole file');
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
