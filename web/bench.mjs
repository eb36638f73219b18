#!/usr/bin/env node
// node web/bench.mjs [MODEL.knot] [FILE.wav] [-b N] [--runs N]
//
// The WebAssembly engine (in this Node.js) against the native engine (one
// thread, the build's whisperknot-transcribe: $WK_NATIVE_BUILD, else
// ci-build, build-wasm-native or build) on the same knot and audio: the
// encoder window, the decoder step, end to end, and the real-time factor,
// side by side with their ratios. Figures only, no assertions; the best of
// --runs (default 3) runs of each, as the machine may be busy.
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync } from 'node:fs';
import { Whisperknot } from './whisperknot.mjs';
import { defaultModel, nativeTool, sampleWav } from './tests/helpers.mjs';

const args = process.argv.slice(2), pos = [];
let beam = 1, runs = 3;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '-b') beam = parseInt(args[++i], 10);
  else if (args[i] === '--runs') runs = parseInt(args[++i], 10);
  else pos.push(args[i]);
}
const model = pos[0] ?? defaultModel, wav = pos[1] ?? sampleWav;

function best(list, key) { return Math.min(...list.map((r) => r[key])); }

async function wasmRun(wk, m, samples) {
  const s = m.createStream({ beamSize: beam });
  const t0 = performance.now();
  for (let p = 0; p < samples.length; p += 16000) { s.feed(samples.subarray(p, p + 16000)); s.take(); }
  s.finish();
  const text = s.take().map((g) => g.text.trim()).join(' ');
  const wall = (performance.now() - t0) / 1000;
  const st = s.stats();
  s.free();
  return { wall, enc: st.encoderSeconds / st.nWindows, dec: st.decoderSeconds / Math.max(1, st.nTokens),
    mel: st.melSeconds, encTotal: st.encoderSeconds, decTotal: st.decoderSeconds, audio: st.audioSeconds, text };
}

function nativeStats(exe) {
  const r = execFileSync('sh', ['-c', '"$0" -m "$1" -b "$2" -t 1 --stats "$3" 2>&1 >/dev/null', exe, model, String(beam), wav],
    { encoding: 'utf8' });
  const kv = Object.fromEntries(r.split('\n').filter((l) => l.includes(': ')).map((l) => l.split(': ')));
  return { wall: +kv.wall_seconds, enc: +kv.encoder_seconds / +kv.windows, dec: +kv.decoder_seconds / Math.max(1, +kv.tokens),
    mel: +kv.mel_seconds, encTotal: +kv.encoder_seconds, decTotal: +kv.decoder_seconds, audio: +kv.audio_seconds };
}

const wk = await Whisperknot.create();
const m = await wk.loadModel(model);
const { samples } = wk.parseWav(readFileSync(wav));
const w = [];
for (let i = 0; i < runs; i++) w.push(await wasmRun(wk, m, samples));
const exe = nativeTool('tools/whisperknot-transcribe');
const n = [];
if (exe) for (let i = 0; i < runs; i++) n.push(nativeStats(exe));

const audio = samples.length / 16000;
const wasmSize = statSync(new URL('./whisperknot.wasm', import.meta.url)).size;
console.log(`model: ${model} (${(m.info.fileBytes / 1e6).toFixed(1)} MB), audio: ${wav} (${audio.toFixed(2)} s), beam ${beam}, best of ${runs}`);
console.log(`wasm: node ${process.versions.node}, kernels ${wk.kernels}, whisperknot.wasm ${(wasmSize / 1024).toFixed(0)} KiB; native: ${exe ?? 'not built'}, 1 thread`);
const rows = [
  ['encoder window (s)', 'enc'], ['decoder step (ms)', 'dec', 1000], ['mel (s)', 'mel'],
  ['encoder total (s)', 'encTotal'], ['decoder total (s)', 'decTotal'], ['end to end (s)', 'wall'],
];
console.log('figure'.padEnd(22) + 'wasm'.padStart(10) + 'native'.padStart(10) + 'wasm/native'.padStart(13));
for (const [name, key, scale = 1] of rows) {
  const a = best(w, key) * scale, b = n.length ? best(n, key) * scale : NaN;
  console.log(name.padEnd(22) + a.toFixed(3).padStart(10) + (n.length ? b.toFixed(3) : '-').padStart(10) +
    (n.length ? (a / b).toFixed(2) + 'x' : '-').padStart(13));
}
const rtfW = best(w, 'wall') / audio, rtfN = n.length ? best(n, 'wall') / audio : NaN;
console.log('real-time factor'.padEnd(22) + rtfW.toFixed(4).padStart(10) + (n.length ? rtfN.toFixed(4) : '-').padStart(10) +
  (n.length ? (rtfW / rtfN).toFixed(2) + 'x' : '-').padStart(13));
console.log(`text (wasm): ${w[0].text}`);
m.free();
