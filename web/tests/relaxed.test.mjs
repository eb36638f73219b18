// The relaxed modules (whisperknot-relaxed.wasm and its threaded twin,
// web/README.md): the native AVX2 kernels built for wasm
// (engine/x86-on-wasm.h), so they decode as native AVX2 does, bit for
// bit: the same tokens, token probabilities and segment scores as
// whisperknot-transcribe with WK_KERNELS=avx2, at the default settings
// (int8 decoder activations, temperature fallback), greedy and with beam
// search, on the files whose near-ties part every other pair of kernel
// sets (parity.test.mjs). Runs where Node.js runs relaxed SIMD: Node.js
// 22, or 20 with --experimental-wasm-relaxed-simd, as .ci/test-all.sh
// runs it.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { Whisperknot, hasRelaxedSimd } from '../whisperknot.mjs';
import { decodeFile, defaultModel, jfkWav, kedWav, nativeTool, sampleWav, wasmBuild } from './helpers.mjs';

const transcribe = nativeTool('tools/whisperknot-transcribe');
const relaxedFile = new URL('../whisperknot-relaxed.wasm', import.meta.url);
const cpu = existsSync('/proc/cpuinfo') ? readFileSync('/proc/cpuinfo', 'utf8') : '';
const skip = !hasRelaxedSimd() ? 'this Node.js runs no relaxed SIMD (20: --experimental-wasm-relaxed-simd)'
  : !existsSync(relaxedFile) ? 'no web/whisperknot-relaxed.wasm (web/build.sh with clang >= 16 and libsimde-dev)'
    : !transcribe ? 'no native build (set WK_NATIVE_BUILD)'
      : !/ avx2 /.test(cpu) || !/ fma /.test(cpu) || !/ f16c /.test(cpu) ? 'no AVX2 here: no native AVX2 to compare with'
        : false;

// what both print: each segment's text, scores and tokens (probabilities
// as the native JSON rounds them)
const r4 = (x) => Number(x).toFixed(4);
function native(wav, beam) {
  const out = execFileSync(transcribe, ['-m', defaultModel, '-b', String(beam), '-t', '1', '-f', 'json',
    '--tokens', wav], { encoding: 'utf8', maxBuffer: 1 << 26, stdio: ['ignore', 'pipe', 'ignore'],
    env: { ...process.env, WK_KERNELS: 'avx2', WK_INT8: '' } });
  return JSON.parse(out).segments.map((s) => ({
    text: s.text, avgLogprob: r4(s.avg_logprob),
    tokens: s.tokens.map((t) => `${t.id}:${r4(t.p)}`),
  }));
}

let wk, wk3;
async function relaxed(wav, beam, instance = wk) {
  const segs = await decodeFile(instance, defaultModel, wav, beam);
  return segs.map((g) => ({
    text: g.text.trim(), avgLogprob: r4(g.avgLogprob),
    tokens: g.tokens.map((t) => `${t.id}:${r4(t.p)}`),
  })).filter((g) => g.text !== '' || g.tokens.length);
}

const threadsFile = new URL('../whisperknot-threads-relaxed.wasm', import.meta.url);
const skipThreads = skip || (!existsSync(threadsFile) && 'no web/whisperknot-threads-relaxed.wasm');

before(async () => {
  if (skip) return;
  wk = await Whisperknot.create();
  if (!skipThreads) wk3 = await Whisperknot.create({ threads: 3 });
});
after(() => wk3?.close());

test('the relaxed module runs the AVX2 kernels', { skip }, () => {
  assert.equal(wk.kernels, 'wasm-avx2');
});

const files = { 'sample.wav': sampleWav, 'jfk.wav': existsSync(jfkWav) ? jfkWav : null, 'festival verse': kedWav };
for (const [name, wav] of Object.entries(files))
  for (const beam of [1, 5])
    test(`${name}, beam ${beam}: the tokens and scores of native AVX2`, { skip: skip || (!wav && `no ${name}`) },
      async () => {
        const want = native(wav, beam);
        assert.ok(want.length > 0);
        assert.deepEqual(await relaxed(wav, beam), want);
      });

// The threaded relaxed module (whisperknot-threads-relaxed.wasm): the
// same kernels on three threads (two workers), which change no result.
test('three threads with relaxed SIMD: the threaded relaxed module', { skip: skipThreads }, () => {
  assert.equal(wk3.threads, 3);
  assert.equal(wk3.kernels, 'wasm-avx2');
});
for (const [name, wav, beam] of [['sample.wav', sampleWav, 1], ['jfk.wav', existsSync(jfkWav) ? jfkWav : null, 5]])
  test(`${name}, beam ${beam}, three threads: the tokens and scores of native AVX2`,
    { skip: skipThreads || (!wav && `no ${name}`), timeout: 300000 }, async () => {
      const want = native(wav, beam);
      assert.ok(want.length > 0);
      assert.deepEqual(await relaxed(wav, beam, wk3), want);
    });

// (wasmBuild: the build web/build.sh copied the modules from)
for (const f of ['whisperknot-relaxed.wasm', 'whisperknot-threads-relaxed.wasm'])
  test(`web/build.sh copied the ${f} the build made`, { skip: !existsSync(`${wasmBuild}/web/${f}`) && 'the build made none' }, () => {
    assert.deepEqual(readFileSync(new URL(`../${f}`, import.meta.url)), readFileSync(`${wasmBuild}/web/${f}`));
  });
