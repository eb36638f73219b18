// Paths the Node.js tests share: the wasm build, the native build whose
// tools give the reference results, the shared test data.
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const inRoot = (p) => path.resolve(root, p);

export const wasmBuild = inRoot(process.env.WK_WASM_BUILD ?? 'build-wasm');

// WK_NATIVE_BUILD names it (CI: ci-build); otherwise the first one there
export const nativeBuild = process.env.WK_NATIVE_BUILD
  ? inRoot(process.env.WK_NATIVE_BUILD)
  : ['ci-build', 'build-wasm-native', 'build'].map(inRoot)
    .find((d) => existsSync(path.join(d, 'tools/whisperknot-transcribe')));

export const sharedData = inRoot(process.env.WK_SHARED_DATA ?? '../shared/data');

export const defaultModel = inRoot('knots/model/default.knot');
export const sampleWav = inRoot('examples/data/sample.wav');
export const jfkWav = path.join(sharedData, 'jfk.wav');
// festival ked_diphone reading a verse (tests/data/word-times/README)
export const kedWav = inRoot('tests/data/word-times/enterprise-ked.wav');

export function nativeTool(rel) {
  if (!nativeBuild) return null;
  const p = path.join(nativeBuild, rel);
  return existsSync(p) ? p : null;
}

// The segments of a WAV file decoded by a stream of model (a knot's path,
// loaded and freed here, or a Model of wk's), fed 1 s at a time as
// whisperknot-transcribe feeds it, taken after every feed.
export async function decodeFile(wk, model, wav, beam = 1) {
  const m = typeof model === 'string' ? await wk.loadModel(model) : model;
  const { samples } = wk.parseWav(readFileSync(wav));
  const s = m.createStream({ beamSize: beam });
  const segs = [];
  for (let p = 0; p < samples.length; p += 16000) {
    s.feed(samples.subarray(p, p + 16000));
    segs.push(...s.take());
  }
  s.finish();
  segs.push(...s.take());
  s.free();
  if (m !== model) m.free();
  return segs;
}
