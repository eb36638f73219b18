// Engine unit tests built for wasm32 (web/meson.build), run as WASI
// commands: the wasm SIMD128 kernel set held to the reference kernels
// (tests/test-kernels.c), the portable FFT to a direct DFT
// (tests/test-fft.c), and the log-mel front end, which uses that FFT in
// the wasm build, to Whisper's filters and a double-precision reference
// (tests/test-mel.c, with tests/data and the shared data preopened).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { WASI } from 'node:wasi';
import path from 'node:path';
import { root, sharedData, wasmBuild } from './helpers.mjs';

async function runWasiTap(file) {
  const chunks = [];
  const { openSync, closeSync, readFileSync: rf, mkdtempSync } = await import('node:fs');
  const dir = mkdtempSync(path.join((await import('node:os')).tmpdir(), 'wk-wasi-'));
  const outPath = path.join(dir, 'stdout');
  const fd = openSync(outPath, 'w');
  const wasi = new WASI({
    version: 'preview1', args: [path.basename(file)], stdout: fd,
    env: { WK_TEST_DATA: '/tests-data', WK_SHARED_DATA: '/shared' },
    preopens: { '/tests-data': path.join(root, 'tests/data'), '/shared': sharedData },
  });
  const mod = await WebAssembly.compile(readFileSync(file));
  const inst = await WebAssembly.instantiate(mod, wasi.getImportObject());
  const rc = wasi.start(inst);
  closeSync(fd);
  chunks.push(rf(outPath, 'utf8'));
  return { rc, out: chunks.join('') };
}

for (const name of ['kernels', 'fft', 'mel']) {
  test(`wasm32 test-${name}: every TAP point passes`, async () => {
    const { rc, out } = await runWasiTap(path.join(wasmBuild, 'web', `test-${name}.wasm`));
    const notOk = out.split('\n').filter((l) => l.startsWith('not ok'));
    assert.deepEqual(notOk, [], out);
    assert.match(out, /^1\.\.\d+$/m, 'the TAP plan came');
    assert.equal(rc, 0, out);
  });
}

test('wasm32 test-kernels: the wasm set is the one in use', async () => {
  const { out } = await runWasiTap(path.join(wasmBuild, 'web', 'test-kernels.wasm'));
  assert.match(out, /# kernels in use: wasm/);
});
