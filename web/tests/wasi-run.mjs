// node wasi-run.mjs FILE.wasm [ARGS...]: runs a WASI command (an engine
// unit test built for wasm32, or bench-kernels.wasm) with tests/data and
// the shared data preopened as $WK_TEST_DATA and $WK_SHARED_DATA; its exit
// status is the program's.
// One process per program: a crash stays in it.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { WASI } from 'node:wasi';
import { root, sharedData } from './helpers.mjs';

const file = process.argv[2];
const wasi = new WASI({
  version: 'preview1', args: [path.basename(file), ...process.argv.slice(3)],
  env: { WK_TEST_DATA: '/tests-data', WK_SHARED_DATA: '/shared' },
  preopens: { '/tests-data': path.join(root, 'tests/data'), '/shared': sharedData },
});
// getImportObject came with Node.js 18.17 / 19.8
const imports = wasi.getImportObject ? wasi.getImportObject() : { wasi_snapshot_preview1: wasi.wasiImport };
const inst = await WebAssembly.instantiate(await WebAssembly.compile(readFileSync(file)), imports);
process.exitCode = wasi.start(inst);
