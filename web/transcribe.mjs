#!/usr/bin/env node
// node web/transcribe.mjs [OPTIONS] MODEL.knot FILE.wav
//
// Transcribes a 16 kHz WAV file with the WebAssembly engine and prints one
// line per segment, as whisperknot-transcribe does (plain text). Options,
// as whisperknot-transcribe's: -b N (beam size; default 1, greedy: five
// beams cost about three times the decoding; whisperknot-transcribe's
// default is 5), -t N (threads, default 1: more runs the threaded module,
// with the same text), -l LANG,
// --latency MS (the live policy), --no-fallback (no temperature fallback:
// what greedy or beam search decodes, never a sample), --stats (timings on
// standard error).
// The engine sees the WK_* variables of the environment (WK_KERNELS=ref,
// WK_INT8=...), as whisperknot-transcribe's engine does.
import { readFile } from 'node:fs/promises';
import { Whisperknot, WhisperknotError } from './whisperknot.mjs';

const PROGRAM = 'transcribe.mjs';
const CHUNK = 16000; // audio per feed, as whisperknot-transcribe

function usage(code) {
  (code ? process.stderr : process.stdout).write(
    `usage: node web/${PROGRAM} [-b N] [-t N] [-l LANG] [--latency MS] [--no-fallback] [--stats] MODEL.knot FILE.wav\n`);
  process.exit(code);
}

const args = process.argv.slice(2), pos = [], params = { beamSize: 1 };
let stats = false, threads = 1;
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  const val = () => { if (i + 1 >= args.length) usage(2); return args[++i]; };
  if (a === '-b' || a === '--beam-size') params.beamSize = parseInt(val(), 10);
  else if (a === '-t' || a === '--threads') threads = Number(val());
  else if (a === '-l' || a === '--language') params.language = val();
  else if (a === '--latency') params.latencyMs = parseInt(val(), 10);
  else if (a === '--no-fallback') params.temperatureInc = 0;
  else if (a === '--stats') stats = true;
  else if (a === '-h' || a === '--help') usage(0);
  else if (a.startsWith('-') && a !== '-') usage(2);
  else pos.push(a);
}
if (pos.length !== 2) usage(2);
if (params.beamSize !== undefined && !(params.beamSize >= 1 && params.beamSize <= 16)) usage(2);

try {
  const t0 = performance.now();
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => k.startsWith('WK_')));
  const wk = await Whisperknot.create({ env, threads });
  const model = await wk.loadModel(pos[0]);
  let wav;
  try {
    wav = wk.parseWav(await readFile(pos[1]));
  } catch (e) {
    throw new WhisperknotError(`${e.message}`, 1);
  }
  if (wav.rate !== 16000) {
    process.stderr.write(`${PROGRAM}: ${pos[1]}: the sample rate is ${wav.rate} Hz; whisperknot needs 16000 Hz\n`);
    process.exit(1);
  }
  const live = (params.latencyMs ?? 0) > 0;
  if (live) await wk.loadVad();
  // the engine ends each segment's or utterance's line (textLines)
  const stream = model.createStream({ ...params, textLines: true });
  const tLoaded = performance.now();
  const write = (cues) => {
    for (const c of cues)
      if (c.kind === 'text') process.stdout.write(c.before + c.text + c.after);
  };
  for (let p = 0; p < wav.samples.length; p += CHUNK) {
    stream.feed(wav.samples.subarray(p, p + CHUNK));
    write(stream.takeCues());
  }
  stream.finish();
  write(stream.takeCues());
  const tDone = performance.now();
  if (stats) {
    const s = stream.stats(), audio = wav.samples.length / 16000, wall = (tDone - tLoaded) / 1000;
    process.stderr.write([
      `model: ${pos[0]}`, `model_bytes: ${model.info.fileBytes}`, `model_params: ${model.info.nParams}`,
      `kernels: ${wk.kernels}`,
      `load_seconds: ${((tLoaded - t0) / 1000).toFixed(3)}`, `audio_seconds: ${audio.toFixed(3)}`,
      `wall_seconds: ${wall.toFixed(3)}`, `real_time_factor: ${(audio > 0 ? wall / audio : 0).toFixed(4)}`,
      `mel_seconds: ${s.melSeconds.toFixed(3)}`, `encoder_seconds: ${s.encoderSeconds.toFixed(3)}`,
      `decoder_seconds: ${s.decoderSeconds.toFixed(3)}`, `windows: ${s.nWindows}`, `tokens: ${s.nTokens}`,
      `state_bytes: ${s.stateBytes}`, `language: ${stream.language ?? ''}`, ''].join('\n'));
  }
  stream.free();
  model.free();
} catch (e) {
  if (e instanceof WhisperknotError) {
    process.stderr.write(`${PROGRAM}: ${e.message}\n`);
    process.exit(1);
  }
  throw e;
}
