// Engine unit tests built for wasm32 (web/meson.build), run as WASI
// commands: the wasm SIMD128 kernel set held to the reference kernels
// (tests/test-kernels.c), the portable FFT to a direct DFT
// (tests/test-fft.c), and the log-mel front end, which uses that FFT in
// the wasm build, to Whisper's filters and a double-precision reference
// (tests/test-mel.c, with tests/data and the shared data preopened).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { hasRelaxedSimd } from '../whisperknot.mjs';
import { wasmBuild } from './helpers.mjs';

const runner = path.join(path.dirname(fileURLToPath(import.meta.url)), 'wasi-run.mjs');

function runWasiTap(name) {
  const major = +process.versions.node.split('.')[0];
  const flags = major < 20 ? ['--experimental-wasi-unstable-preview1'] : [];
  if (name === 'kernels-relaxed' && major < 22) flags.push('--experimental-wasm-relaxed-simd');
  const r = spawnSync(process.execPath, [...flags, '--no-warnings', runner,
    path.join(wasmBuild, 'web', `test-${name}.wasm`)], { encoding: 'utf8', maxBuffer: 1 << 24 });
  return { rc: r.status, out: r.stdout, err: r.stderr + (r.signal ? ` (signal ${r.signal})` : '') };
}

for (const name of ['kernels', 'fft', 'mel']) {
  test(`wasm32 test-${name}: every TAP point passes`, () => {
    const { rc, out, err } = runWasiTap(name);
    const notOk = out.split('\n').filter((l) => l.startsWith('not ok'));
    assert.deepEqual(notOk, [], out + err);
    assert.match(out, /^1\.\.\d+$/m, `the TAP plan came\n${out}${err}`);
    assert.equal(rc, 0, out + err);
    if (name === 'kernels') assert.match(out, /# kernels in use: wasm$/m, 'the wasm set is the one in use');
  });
}

// The relaxed module's test-kernels (web/meson.build): the native AVX2
// set built for wasm (engine/x86-on-wasm.h) held to the reference as well.
const relaxedTests = path.join(wasmBuild, 'web', 'test-kernels-relaxed.wasm');
test('wasm32 test-kernels-relaxed: every TAP point passes, the AVX2 set in use', {
  skip: !existsSync(relaxedTests) ? 'the build made no relaxed module (clang >= 16 and libsimde-dev)'
    : !hasRelaxedSimd() ? 'this Node.js runs no relaxed SIMD (20: --experimental-wasm-relaxed-simd)' : false,
}, () => {
  const { rc, out, err } = runWasiTap('kernels-relaxed');
  const notOk = out.split('\n').filter((l) => l.startsWith('not ok'));
  assert.deepEqual(notOk, [], out + err);
  assert.match(out, /^1\.\.\d+$/m, `the TAP plan came\n${out}${err}`);
  assert.equal(rc, 0, out + err);
  assert.match(out, /# testing kernel set wasm-avx2 against the reference/);
  assert.match(out, /# kernels in use: wasm-avx2$/m);
});
