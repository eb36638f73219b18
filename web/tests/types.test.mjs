// whisperknot.d.ts against a program that uses every part of the module
// (types-check.ts), with TypeScript's strictest checks; and the modules'
// size bound (issue 19: at most 600 KB).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const web = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const tsc = path.join(web, 'node_modules/typescript/bin/tsc');

test('whisperknot.d.ts types a program using the whole module', { skip: !existsSync(tsc) && 'no typescript (npm ci in web/)' }, () => {
  const r = spawnSync(process.execPath, [tsc, '--noEmit', '--strict', '--module', 'nodenext',
    '--moduleResolution', 'nodenext', '--target', 'es2022', '--lib', 'es2022,dom',
    path.join(web, 'tests/types-check.ts')], { encoding: 'utf8' });
  assert.equal(r.status, 0, r.stdout + r.stderr);
});

for (const file of ['whisperknot.wasm', 'whisperknot-threads.wasm', 'whisperknot-relaxed.wasm',
  'whisperknot-threads-relaxed.wasm']) {
  const absent = file.includes('relaxed') && !existsSync(path.join(web, file))
    && 'the build made no relaxed module (clang >= 16 and libsimde-dev)';
  test(`${file} is at most 600 KB`, { skip: absent }, () => {
    const size = statSync(path.join(web, file)).size;
    assert.ok(size <= 600 * 1024, `${size} bytes`);
  });
}
