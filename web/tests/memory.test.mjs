// Ten minutes of silence fed in 100 ms buffers grow no memory: the stream
// allocates everything when it is made (whisperknot.h), so WebAssembly
// memory, which can only grow, keeps its size after the first window.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Whisperknot } from '../whisperknot.mjs';
import { defaultModel } from './helpers.mjs';

for (const live of [false, true]) {
  test(`10 minutes of silence (${live ? 'live policy with VAD' : 'offline'}) grow no memory`, async () => {
    const wk = await Whisperknot.create();
    const model = await wk.loadModel(defaultModel);
    if (live) await wk.loadVad();
    const s = model.createStream(live ? { latencyMs: 2000 } : { beamSize: 1 });
    const buf = new Float32Array(1600);
    let after1min = 0, segs = 0;
    for (let i = 0; i < 6000; i++) {
      s.feed(buf);
      segs += s.take().length;
      if (live) s.partial();
      if (i === 600) after1min = wk.memoryBytes;
    }
    s.finish();
    segs += s.take().length;
    const st = s.stats();
    assert.equal(Math.round(st.audioSeconds), 600);
    // every field of wk_stream_stats, in whisperknot.h's order (28)
    assert.equal(Object.keys(st).length, 28);
    for (const [k, v] of Object.entries(st)) assert.ok(Number.isFinite(v) && v >= 0, k);
    assert.equal(st.nSlowRuns, 0, 'silence runs no model');
    assert.equal(wk.memoryBytes, after1min, 'memory grew after the first minute');
    s.free();
    model.free();
  });
}
