// Compiled (never run) by types.test.mjs: the declarations of
// whisperknot.d.ts describe the module as its users call it.
import { Whisperknot, WhisperknotError, clockSeconds, hasRelaxedSimd, loadModel, type Segment, type StreamStats } from '../whisperknot.mjs';

export async function useAll(bytes: ArrayBuffer): Promise<string> {
  const wk = await Whisperknot.create({ env: { WK_KERNELS: 'ref' }, log: (l: string) => void l });
  const model = await wk.loadModel(bytes);
  const n: number = model.info.nMels + model.info.nVocab;
  await wk.loadVad();
  const s = model.createStream({ beamSize: 1, latencyMs: 2000, commit: 'agreement', language: 'en' });
  s.feed(new Float32Array(1600), clockSeconds());
  s.flush();
  s.finish();
  const segs: Segment[] = s.take();
  const partial = s.partial();
  const serial: number = partial.serial;
  const st: StreamStats = s.stats();
  const lang: string | null = s.language;
  s.free();
  model.free();
  const m2 = await loadModel(new URL('file:///x.knot'));
  await m2.engine.loadVad();
  m2.free();
  m2.engine.close();
  const wk2 = await Whisperknot.create({ threads: 2 });
  wk2.close();
  const relaxed: boolean = hasRelaxedSimd();
  const wk3 = await Whisperknot.create({ relaxedSimd: !relaxed });
  const kernels: string = wk3.kernels;
  void kernels;
  const wav = wk.parseWav(new Uint8Array(0));
  try {
    wk.parseWav(new ArrayBuffer(4));
  } catch (e) {
    if (e instanceof WhisperknotError) return `${e.status} ${e.message}`;
  }
  return `${n} ${segs.map((g) => g.text + g.tokens.map((t) => t.id + t.bytes.length).join()).join()} ${serial} ${st.encoderSeconds} ${lang} ${wav.samples.length} ${wk.kernels} ${wk.memoryBytes} ${wk.threads}`;
}
