// Engine errors reach JavaScript as WhisperknotError with the engine's
// message, never as a trap or an empty result: truncated and corrupted
// knots, a missing file, a bad WAV, bad stream parameters, use after free.
import { test, before } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { Whisperknot, WhisperknotError } from '../whisperknot.mjs';
import { defaultModel } from './helpers.mjs';

let wk, knot;
before(async () => {
  wk = await Whisperknot.create({ log: () => {} });
  knot = readFileSync(defaultModel);
});

async function rejects(src, re) {
  await assert.rejects(wk.loadModel(src), (e) => {
    assert.ok(e instanceof WhisperknotError, `a WhisperknotError, not ${e}`);
    assert.match(e.message, re);
    assert.notEqual(e.status, 0);
    return true;
  });
}

test('a truncated knot throws a format error naming the damage', async () => {
  for (const len of [0, 3, 24, 4096, Math.floor(knot.length / 2), knot.length - 1])
    await rejects(knot.subarray(0, len), /truncated|too short|empty|past the end|beyond|size|magic|not a knot|damaged|cannot/i);
});

test('a knot with a bad magic or a corrupt header throws', async () => {
  const bad = Uint8Array.from(knot.subarray(0, 1 << 20));
  bad[0] ^= 0xff;
  await rejects(bad, /magic|not a knot|GGUF|format/i);
  const hdr = Uint8Array.from(knot);
  // the tensor count (GGUF header, bytes 8..15) made absurd
  new DataView(hdr.buffer).setBigUint64(8, 0xffffffffffn, true);
  await rejects(hdr, /tensor|count|truncated|too|format|damaged/i);
});

test('random bytes throw, never trap', async () => {
  let s = 1;
  const junk = new Uint8Array(1 << 16).map(() => ((s = (s * 1103515245 + 12345) >>> 0) >>> 24));
  await rejects(junk, /./);
});

test('a missing file throws with its name', async () => {
  await rejects('/nonexistent/model.knot', /nonexistent/);
});

test('the engine is still usable after failures', async () => {
  const m = await wk.loadModel(knot);
  assert.equal(m.info.nMels, 80);
  const s = m.createStream({ beamSize: 1 });
  s.feed(new Float32Array(16000));
  s.finish();
  assert.ok(Array.isArray(s.take()));
  assert.throws(() => s.feed(new Float32Array(10)), (e) => e instanceof WhisperknotError && /state/i.test(e.message));
  s.free();
  assert.throws(() => s.take(), /freed/);
  assert.throws(() => m.createStream({ beamSize: 99 }), WhisperknotError);
  assert.throws(() => m.createStream({ latencyMs: 1000 }), /loadVad/);
  m.free();
});

test('a bad WAV throws the reader message', () => {
  assert.throws(() => wk.parseWav(new Uint8Array([1, 2, 3, 4])), (e) => e instanceof WhisperknotError && e.message.length > 0);
});
