// The recognizer's thread: the WebAssembly engine runs here, so that a
// model run (up to a second or two) never blocks the page. Messages in:
// {type: 'load', model, vad}, {type: 'live', latencyMs}, {type: 'audio',
// samples, due}, {type: 'stop'}, {type: 'file', samples}. Messages out:
// {type: 'ready', info, kernels}, {type: 'words', committed, partial,
// stats}, {type: 'file-done', segments, stats, seconds}, {type: 'error'}.
import { Whisperknot } from './whisperknot.mjs';

let wk = null, model = null, live = null;

function post(type, data = {}) { self.postMessage({ type, ...data }); }

function words(stream) {
  // the engine's cues (textLines): each word with its space, a newline
  // where an utterance's line ends
  const committed = stream.takeCues().filter((c) => c.kind === 'text')
    .map((c) => ({ text: c.before + c.text, start: c.start, end: c.end, lineEnd: c.after === '\n' }));
  const partial = stream.partial().map((s) => ({ text: s.text, end: s.end, stability: s.stability, spaceBefore: s.spaceBefore }));
  return { committed, partial, stats: stream.stats() };
}

self.onmessage = async ({ data: m }) => {
  try {
    if (m.type === 'load') {
      // up to four threads where the page is cross-origin isolated
      // (serve.mjs sends COOP/COEP): the threaded module, its workers
      // started from here; one thread elsewhere
      const threads = self.crossOriginIsolated ? Math.max(1, Math.min(4, navigator.hardwareConcurrency || 1)) : 1;
      try {
        wk = await Whisperknot.create({ threads });
      } catch (e) {
        if (threads === 1) throw e;
        console.warn(`whisperknot: ${threads} threads failed (${e.message}); one thread`);
        wk = await Whisperknot.create();
      }
      model = await wk.loadModel(new URL(m.model, self.location.href));
      await wk.loadVad(m.vad ? new URL(m.vad, self.location.href) : undefined);
      // A short transcription of silence before the page says it is
      // ready: V8 runs a wasm function baseline-compiled (Liftoff) until
      // it has been hot, and its optimized code only from its next call,
      // so the first live run (and the first stream's allocation) would
      // otherwise take several times as long as the others, and the
      // first partial came 0.6-0.7 s behind the speech where the rest
      // came 0.1-0.4 s behind.
      const warm = model.createStream({ beamSize: 1 });
      warm.feed(new Float32Array(32000));
      warm.finish();
      warm.take();
      warm.free();
      post('ready', { info: model.info, kernels: wk.kernels, threads: wk.threads, memory: wk.memoryBytes });
    } else if ((m.type === 'live' || m.type === 'file') && !model) {
      // the page enables its controls once ready: a message before that
      throw new Error('the model is not loaded yet');
    } else if (m.type === 'live') {
      if (live) live.free();
      live = model.createStream({ latencyMs: m.latencyMs ?? 2000, textLines: true });
    } else if (m.type === 'audio' && live) {
      live.feed(m.samples, m.due);
      post('words', words(live));
    } else if (m.type === 'stop' && live) {
      live.finish();
      post('words', { ...words(live), final: true });
      live.free();
      live = null;
    } else if (m.type === 'file') {
      const s = model.createStream({ beamSize: m.beamSize });
      const t0 = performance.now();
      const segments = [];
      for (let p = 0; p < m.samples.length; p += 16000) {
        s.feed(m.samples.subarray(p, p + 16000));
        for (const g of s.take()) { segments.push(g); post('file-segment', { text: g.text, start: g.start, end: g.end, spaceBefore: g.spaceBefore }); }
      }
      s.finish();
      for (const g of s.take()) { segments.push(g); post('file-segment', { text: g.text, start: g.start, end: g.end, spaceBefore: g.spaceBefore }); }
      post('file-done', {
        segments: segments.map((g) => ({ text: g.text, start: g.start, end: g.end })),
        stats: s.stats(), seconds: (performance.now() - t0) / 1000,
      });
      s.free();
    }
  } catch (e) {
    post('error', { message: e.message });
  }
};
