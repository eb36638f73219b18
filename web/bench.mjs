#!/usr/bin/env node
// node web/bench.mjs [MODEL.knot] [FILE.wav] [-b N] [--runs N] [--no-avx2]
//                    [--whispercpp STAGES.js --ggml MODEL.bin] [--wasm FILE]
//                    [--threads N]
//
// (--wasm: another build of whisperknot.wasm than the one next to
// whisperknot.mjs, e.g. the previous commit's, for a before / after;
// (with relaxed SIMD, e.g. node --experimental-wasm-relaxed-simd on
// Node.js 20, the module is whisperknot-relaxed.wasm, web/README.md;
// --wasm web/whisperknot.wasm then times the SIMD128 one);
// --threads N: also the threaded module on N threads (the relaxed one
// where create() takes it), in the same alternation, printed under the
// table against one wasm thread and against native's one thread)
//
// The WebAssembly engine (in this Node.js) against the native engine (one
// thread, the build's whisperknot-transcribe: $WK_NATIVE_BUILD, else
// ci-build, build-wasm-native or build; with its default kernels, the
// widest the CPU has, and, unless --no-avx2, with WK_KERNELS=avx2 as a
// second column, runs alternated) on the same knot and audio: the
// encoder window, the decoder step, end to end, and the real-time factor,
// side by side with their ratios. Figures only, no assertions; the best of
// --runs (default 5) runs of each, alternated, as the machine may be busy.
// The WK_* environment (WK_INT8=0, WK_KERNELS=ref, ...) reaches both engines.
//
// With --whispercpp, also whisper.cpp's own WebAssembly build (the
// wk-whispercpp-stages.js that tools/whispercpp-wasm-build.sh makes) on
// MODEL.bin, the ggml file the knot was converted from, in the same
// Node.js, one thread, greedy: whisper_full over the same audio (end to
// end), its encoder on a 30 s window and its decoder step (positions 16 to
// 47, about where a segment's tokens are), as column "whisper.cpp wasm"
// with the ratio whisper.cpp / ours (run with --no-experimental-fetch: see
// tools/whispercpp-wasm-build.sh).
import { execFileSync } from 'node:child_process';
import { readFileSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Whisperknot } from './whisperknot.mjs';
import { defaultModel, nativeTool, sampleWav } from './tests/helpers.mjs';

const args = process.argv.slice(2), pos = [];
let beam = 1, runs = 5, wcpp = null, ggml = null, avx2 = true, wasmFile = null, threads = 1;
for (let i = 0; i < args.length; i++) {
  if (args[i] === '-b') beam = parseInt(args[++i], 10);
  else if (args[i] === '--runs') runs = parseInt(args[++i], 10);
  else if (args[i] === '--whispercpp') wcpp = args[++i];
  else if (args[i] === '--ggml') ggml = args[++i];
  else if (args[i] === '--no-avx2') avx2 = false;
  else if (args[i] === '--wasm') wasmFile = args[++i];
  else if (args[i] === '--threads') threads = parseInt(args[++i], 10);
  else pos.push(args[i]);
}
if (wcpp && !ggml) {
  process.stderr.write('bench.mjs: --whispercpp needs --ggml MODEL.bin (the same model as ggml)\n');
  process.exit(2);
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
    mel: st.melSeconds, encTotal: st.encoderSeconds, decTotal: st.decoderSeconds, audio: st.audioSeconds, text,
    windows: st.nWindows, tokens: st.nTokens };
}

function nativeStats(exe, kernels) {
  const env = { ...process.env };
  if (kernels) env.WK_KERNELS = kernels;
  else delete env.WK_KERNELS;
  const r = execFileSync('sh', ['-c', '"$0" -m "$1" -b "$2" -t 1 --stats "$3" 2>&1 >/dev/null', exe, model, String(beam), wav],
    { encoding: 'utf8', env });
  const kv = Object.fromEntries(r.split('\n').filter((l) => l.includes(': ')).map((l) => l.split(': ')));
  return { wall: +kv.wall_seconds, enc: +kv.encoder_seconds / +kv.windows, dec: +kv.decoder_seconds / Math.max(1, +kv.tokens),
    mel: +kv.mel_seconds, encTotal: +kv.encoder_seconds, decTotal: +kv.decoder_seconds, audio: +kv.audio_seconds,
    windows: +kv.windows, tokens: +kv.tokens };
}

// the WK_* variables for the wasm engine too, as transcribe.mjs passes them
const wkEnv = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('WK_')));
const wk = await Whisperknot.create(wasmFile ? { env: wkEnv, wasm: readFileSync(wasmFile) } : { env: wkEnv });
const m = await wk.loadModel(model);
const { samples } = wk.parseWav(readFileSync(wav));
const exe = nativeTool('tools/whisperknot-transcribe');
// The engines alternated run by run (the wasm engine, the native engine
// with its default kernels, the widest the CPU has, and unless --no-avx2
// with WK_KERNELS=avx2), so that a slow spell of a shared machine, which
// can last seconds, falls on all of them rather than on one engine's runs;
// the first wasm transcription, while V8 still compiles the hot functions
// with its optimizing tier, is a warm-up and not counted.
const w = [], n = [], n2 = [], wt = [];
const wkT = threads > 1 ? await Whisperknot.create({ env: wkEnv, threads }) : null;
const mT = wkT ? await wkT.loadModel(model) : null;
await wasmRun(wk, m, samples);
if (wkT) await wasmRun(wkT, mT, samples);
for (let i = 0; i < runs; i++) {
  w.push(await wasmRun(wk, m, samples));
  if (wkT) wt.push(await wasmRun(wkT, mT, samples));
  if (exe) {
    n.push(nativeStats(exe, null));
    if (avx2) n2.push(nativeStats(exe, 'avx2'));
  }
}

// whisper.cpp's wasm build: WKB lines, best of the runs
function whispercppStages(extra) {
  const f32 = path.join(os.tmpdir(), `wk-bench-${process.pid}.f32`);
  writeFileSync(f32, new Uint8Array(samples.buffer, samples.byteOffset, samples.byteLength));
  try {
    const out = execFileSync(process.execPath, ['--no-experimental-fetch', wcpp, '-m', ggml, '-a', f32, '-t', '1', '-r', String(runs), ...extra],
      { encoding: 'utf8', maxBuffer: 1 << 24 });
    const kv = {};
    for (const l of out.split('\n')) {
      const m = /^WKB (\S+) ?(.*)$/.exec(l);
      if (!m) continue;
      if (m[1] === 'text') kv.text = m[2].trim();
      else kv[m[1]] = Math.min(kv[m[1]] ?? Infinity, +m[2]);
    }
    return kv;
  } finally {
    unlinkSync(f32);
  }
}
let c = null;
if (wcpp) {
  const full = whispercppStages(['-e']), st = whispercppStages(['-p', '16', '-s', '32']);
  c = { wall: full.full_ms / 1000, enc: st.encoder_ms / 1000, dec: st.decstep_ms / 1000, text: full.text };
}

const audio = samples.length / 16000;
// the module create() chose: the relaxed one where the runtime runs it
const defaultWasm = wk.kernels === 'wasm-avx2' ? 'whisperknot-relaxed.wasm' : 'whisperknot.wasm';
const wasmSize = statSync(wasmFile ?? new URL(`./${defaultWasm}`, import.meta.url)).size;
console.log(`model: ${model} (${(m.info.fileBytes / 1e6).toFixed(1)} MB), audio: ${wav} (${audio.toFixed(2)} s), beam ${beam}, best of ${runs}`);
console.log(`wasm: node ${process.versions.node}, kernels ${wk.kernels}, ${wasmFile ?? defaultWasm} ${(wasmSize / 1024).toFixed(0)} KiB; native: ${exe ?? 'not built'}, 1 thread`);
const rows = [
  ['encoder window (s)', 'enc'], ['decoder step (ms)', 'dec', 1000], ['mel (s)', 'mel'],
  ['encoder total (s)', 'encTotal'], ['decoder total (s)', 'decTotal'], ['end to end (s)', 'wall'],
];
if (c) console.log(`whisper.cpp wasm: ${wcpp} on ${ggml}, 1 thread, greedy`);
const cpp = (key) => (c && c[key] !== undefined && Number.isFinite(c[key]) ? c[key] : null);
const has2 = n2.length > 0;
console.log('figure'.padEnd(22) + 'wasm'.padStart(10) + 'native'.padStart(10) + 'wasm/native'.padStart(13) +
  (has2 ? 'native avx2'.padStart(13) + 'wasm/avx2'.padStart(11) : '') +
  (c ? 'whisper.cpp wasm'.padStart(18) + 'w.cpp/wasm'.padStart(12) : ''));
const ratioCols = (a, list, scale, w1, w2) => {
  if (!list.length) return '-'.padStart(w1) + '-'.padStart(w2);
  const b = best(list, 'x') * scale;
  return b.toFixed(3).padStart(w1) + ((a / b).toFixed(2) + 'x').padStart(w2);
};
const pick = (list, key) => list.map((r) => ({ x: r[key] }));
for (const [name, key, scale = 1] of rows) {
  const a = best(w, key) * scale, x = cpp(key);
  console.log(name.padEnd(22) + a.toFixed(3).padStart(10) + ratioCols(a, pick(n, key), scale, 10, 13) +
    (has2 ? ratioCols(a, pick(n2, key), scale, 13, 11) : '') +
    (c ? (x !== null ? (x * scale).toFixed(3) : '-').padStart(18) + (x !== null ? (x * scale / a).toFixed(2) + 'x' : '-').padStart(12) : ''));
}
const rtfW = best(w, 'wall') / audio;
const rtf = (list) => list.map((r) => ({ x: r.wall / audio }));
console.log('real-time factor'.padEnd(22) + rtfW.toFixed(4).padStart(10) + ratioCols(rtfW, rtf(n), 1, 10, 13) +
  (has2 ? ratioCols(rtfW, rtf(n2), 1, 13, 11) : '') +
  (c ? (c.wall / audio).toFixed(4).padStart(18) + (c.wall / audio / rtfW).toFixed(2).concat('x').padStart(12) : ''));
// the work each engine did: a model unsure of the audio falls back to
// sampling, where kernel sets that round differently take different
// tokens (and windows), so end to end compares like with like only where
// these agree (the encoder window and decoder step are per unit anyway)
const work = (r) => `${r.windows} windows, ${r.tokens} tokens`;
console.log(`work: wasm ${work(w[0])}` + (n.length ? `; native ${work(n[0])}` : '') +
  (n2.length ? `; native avx2 ${work(n2[0])}` : ''));
if (wkT) {
  console.log(`wasm on ${threads} threads (${wkT.kernels === 'wasm-avx2' ? 'whisperknot-threads-relaxed.wasm' : 'whisperknot-threads.wasm'}, ${threads - 1} workers), same runs:`);
  console.log('figure'.padEnd(22) + `wasm ${threads} thr`.padStart(12) + '1 thr/this'.padStart(12) + 'this/native'.padStart(13));
  for (const [name, key, scale = 1] of rows) {
    const a = best(wt, key) * scale, one = best(w, key) * scale;
    const nat = n.length ? best(n, key) * scale : NaN;
    console.log(name.padEnd(22) + a.toFixed(3).padStart(12) + ((one / a).toFixed(2) + 'x').padStart(12) +
      (Number.isFinite(nat) ? (a / nat).toFixed(2) + 'x' : '-').padStart(13));
  }
}
console.log(`load average (os.loadavg): ${os.loadavg().map((v) => v.toFixed(2)).join(' ')} on ${os.cpus().length} CPUs`);
console.log(`text (wasm): ${w[0].text}`);
if (wkT && wt[0].text !== w[0].text) console.log(`text (wasm, ${threads} threads) differs: ${wt[0].text}`);
if (c) console.log(`text (whisper.cpp wasm): ${c.text}`);
m.free();
mT?.free();
wkT?.close();
