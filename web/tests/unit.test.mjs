// Engine unit tests built for wasm32 (web/meson.build), run as WASI
// commands: the wasm SIMD128 kernel set held to the reference kernels
// (tests/test-kernels.c), the portable FFT to a direct DFT
// (tests/test-fft.c), and the log-mel front end, which uses that FFT in
// the wasm build, to Whisper's filters and a double-precision reference
// (tests/test-mel.c, with tests/data and the shared data preopened).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { wasmBuild } from './helpers.mjs';

const runner = path.join(path.dirname(fileURLToPath(import.meta.url)), 'wasi-run.mjs');

function runWasiTap(name) {
  const flags = +process.versions.node.split('.')[0] < 20 ? ['--experimental-wasi-unstable-preview1'] : [];
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
    if (name === 'kernels') assert.match(out, /# kernels in use: wasm/, 'the wasm set is the one in use');
  });
}
