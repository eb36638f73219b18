// Engine unit tests built for wasm32 (web/meson.build): the wasm SIMD128
// kernel set held to the reference kernels (tests/test-kernels.c) and the
// portable FFT to a direct DFT (tests/test-fft.c), run as WASI commands.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { WASI } from 'node:wasi';
import path from 'node:path';
import { wasmBuild } from './helpers.mjs';

async function runWasiTap(file) {
  const chunks = [];
  const { openSync, closeSync, readFileSync: rf, mkdtempSync } = await import('node:fs');
  const dir = mkdtempSync(path.join((await import('node:os')).tmpdir(), 'wk-wasi-'));
  const outPath = path.join(dir, 'stdout');
  const fd = openSync(outPath, 'w');
  const wasi = new WASI({ version: 'preview1', args: [path.basename(file)], env: {}, stdout: fd });
  const mod = await WebAssembly.compile(readFileSync(file));
  const inst = await WebAssembly.instantiate(mod, wasi.getImportObject());
  const rc = wasi.start(inst);
  closeSync(fd);
  chunks.push(rf(outPath, 'utf8'));
  return { rc, out: chunks.join('') };
}

for (const name of ['kernels', 'fft']) {
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
