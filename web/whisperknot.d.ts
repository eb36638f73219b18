// Types of whisperknot.mjs: the WebAssembly engine's JavaScript API, the
// same in Node.js and in browsers. Times of segments and tokens are in
// samples at 16 kHz, as in whisperknot.h.

/** Where a file comes from: bytes, a fetch Response, a URL, or (Node.js)
 * a file path. */
export type Source = ArrayBuffer | ArrayBufferView | Response | URL | string;

/** An engine status other than WK_OK, with the engine's message. */
export class WhisperknotError extends Error {
  readonly name: 'WhisperknotError';
  /** wk_status: 1 io, 2 format, 3 unsupported, 4 nomem, 5 arg, 6 state,
   * 7 internal */
  readonly status: number;
}

/** wk_status names by value ("ok", "io", "format", ...). */
export const statusNames: readonly string[];

/** wk_clock_seconds: the clock of Stream.feed's dueSeconds. */
export function clockSeconds(): number;

/** Whether this JavaScript engine runs WebAssembly's relaxed SIMD (and so
 * whisperknot-relaxed.wasm). */
export function hasRelaxedSimd(): boolean;

export interface CreateOptions {
  /** The module (default: whisperknot.wasm next to whisperknot.mjs). */
  wasm?: WebAssembly.Module | Source;
  /** Environment the engine sees, e.g. { WK_KERNELS: 'ref' }. */
  env?: Record<string, string>;
  /** Receives the engine's standard error, line by line. */
  log?: (line: string) => void;
  /** Threads the engine computes on, 1 (the default) to 17. More than one
   * runs the threaded module (whisperknot-threads.wasm next to
   * whisperknot.mjs, whisperknot-threads-relaxed.wasm with relaxed SIMD,
   * or wasm) with threads - 1 workers on a shared memory:
   * Node.js, or a Web Worker of a cross-origin isolated page (COOP/COEP).
   * Elsewhere create() throws. */
  threads?: number;
  /** false: whisperknot.wasm or whisperknot-threads.wasm (SIMD128) even
   * where the engine runs relaxed SIMD; by default create() then loads
   * whisperknot-relaxed.wasm or whisperknot-threads-relaxed.wasm, the native
   * AVX2 kernels with fused multiply-adds (when the build made them). */
  relaxedSimd?: boolean;
}

/** wk_model_info */
export interface ModelInfo {
  nVocab: number;
  nMels: number;
  nAudioCtx: number;
  nAudioState: number;
  nAudioHead: number;
  nAudioLayer: number;
  nTextCtx: number;
  nTextState: number;
  nTextHead: number;
  nTextLayer: number;
  multilingual: boolean;
  nParams: number;
  fileBytes: number;
}

/** wk_stream_params; every field left out keeps the engine's default. */
export interface StreamParams {
  /** ISO 639-1 code, or 'auto' / undefined to detect. */
  language?: string;
  translate?: boolean;
  /** 1 = greedy; default 5 offline, 3 with the live policy. */
  beamSize?: number;
  /** > 0: the live policy with this target delay (ms). */
  latencyMs?: number;
  /** Live policy: Silero VAD (default true; needs Whisperknot.loadVad). */
  useVad?: boolean;
  vadThreshold?: number;
  vadMinSilenceMs?: number;
  /** Encoder positions per live run: 0 as the model was trained (its
   * knot's whisperknot.live_audio_ctx; the default), -1 the full 30 s,
   * -2 only the window's audio, N at least N. */
  audioCtx?: number;
  commit?: 'deadline' | 'agreement';
  /** Temperature fallback step; 0 disables fallback. */
  temperatureInc?: number;
  noTimestamps?: boolean;
  suppressBlank?: boolean;
  /** Word times from the model's alignment heads (default true); false
   * shares each segment's span out by byte length (cheaper). */
  wordTimes?: boolean;
  /** takeCues() for a terminal or a file: each offline segment and each
   * utterance ends with a newline, live words carry their spaces
   * (wk_stream_params.text_lines; default false). */
  textLines?: boolean;
}

/** wk_token */
export interface Token {
  id: number;
  p: number;
  start: number;
  end: number;
  /** The token's text; a token may hold part of a UTF-8 sequence (BPE
   * splits characters), which shows here as U+FFFD. */
  text: string;
  /** A copy of the token's raw UTF-8 bytes: those of a segment's tokens,
   * joined, decode to its text (before trimming). */
  bytes: Uint8Array;
}

/** wk_segment */
export interface Segment {
  start: number;
  end: number;
  text: string;
  tokens: Token[];
  avgLogprob: number;
  noSpeechProb: number;
  /** Live policy: a marker that the utterance before it ended. */
  utteranceEnd: boolean;
  /** 1 for committed words; for partial ones the chance they stay. */
  stability: number;
  /** text is trimmed; whether the model put a space before it (join
   * segments with a space exactly where this is true). */
  spaceBefore: boolean;
  /** The mean probability of its tokens. */
  p: number;
}

/** wk_cue: text ready to show, or a stretch that stays without text. */
export interface Cue {
  kind: 'text' | 'gap' | 'utterance-end';
  start: number;
  end: number;
  /** 'text': show before + text + after from start to end. */
  before: string;
  text: string;
  after: string;
  p: number;
}

/** wk_stream_stats (seconds, counts, bytes). */
export interface StreamStats {
  audioSeconds: number;
  melSeconds: number;
  encoderSeconds: number;
  decoderSeconds: number;
  nWindows: number;
  nTokens: number;
  stateBytes: number;
  nRuns: number;
  vadSeconds: number;
  speechSeconds: number;
  stepSeconds: number;
  lastRunSeconds: number;
  maxRunSeconds: number;
  lastDelaySeconds: number;
  maxDelaySeconds: number;
  nCommitted: number;
  nUtterances: number;
  nClipped: number;
  nZeroed: number;
  nDeadlineCommits: number;
  nLate: number;
  maxLateSeconds: number;
  runEstimateSeconds: number;
  /** word times: the alignment passes' wall time, and the windows aligned */
  alignSeconds: number;
  nAligned: number;
  /** decoder steps batched with other streams' (0 where streams never
   * run at the same time, as in a single-threaded build) */
  nSharedSteps: number;
  /** live runs too slow for the deadlines (greedy; integer encoder
   * products where the kernels have them) */
  nSlowRuns: number;
  /** words withheld at their deadline: the model too unsure of its
   * guess (never written) */
  nWithheld: number;
}

/** A recognition stream (wk_stream). */
export class Stream {
  private constructor();
  /** Mono 16 kHz samples in [-1, 1]; dueSeconds: the first sample's
   * capture time on clockSeconds()'s clock (live deadlines). */
  feed(samples: Float32Array | ArrayLike<number>, dueSeconds?: number): void;
  flush(): void;
  finish(): void;
  reset(): void;
  /** Segments completed since the previous take. */
  take(): Segment[];
  /** The completed segments as cues ready to show (replaces take()). */
  takeCues(): Cue[];
  /** Live policy: the words not committed yet; serial changes with them. */
  partial(): Segment[] & { serial: number };
  readonly language: string | null;
  stats(): StreamStats;
  /** Frees the stream; nothing once its instance is closed (close()
   * freed it). */
  free(): void;
}

/** A loaded knot. */
export class Model {
  private constructor();
  readonly info: ModelInfo;
  /** The Whisperknot instance the model belongs to (its loadVad(),
   * close()). */
  readonly engine: Whisperknot;
  createStream(params?: StreamParams): Stream;
  /** Drops this handle's reference (streams keep their own); nothing
   * once its instance is closed. */
  free(): void;
}

/** One instance of the WebAssembly engine and its memory. */
export class Whisperknot {
  private constructor();
  static create(opts?: CreateOptions): Promise<Whisperknot>;
  /** The kernel set in use: "wasm" (SIMD128), "wasm-avx2" (the relaxed
   * module: native AVX2 kernels) or "ref" (WK_KERNELS=ref). */
  readonly kernels: string;
  /** Bytes of WebAssembly memory (it only grows). */
  readonly memoryBytes: number;
  /** Threads new streams compute on. */
  readonly threads: number;
  /** Ends this instance's use: frees the streams still open (in any
   * order: a threaded instance's streams need its workers), then ends the
   * workers of a threaded instance. Later calls through the instance, its
   * models and streams throw WhisperknotError (status 6; 7 where a worker
   * trapped, which closes the instance); Stream.free() and Model.free()
   * do nothing. */
  close(): void;
  /** Copies the knot once, into WebAssembly memory. */
  loadModel(source: Source): Promise<Model>;
  /** The Silero VAD model the live policy needs (default: the one in
   * knots/vad of this tree, or next to whisperknot.mjs). */
  loadVad(source?: Source): Promise<void>;
  /** A WAV file's samples as the native tools read it (mixed to mono),
   * at the file's rate, not resampled: feed() needs rate 16000. */
  parseWav(bytes: ArrayBuffer | Uint8Array): {
    samples: Float32Array;
    rate: number;
    channels: number;
  };
}

/** Whisperknot.create(opts), then loadModel(source): a new instance each
 * call, the model's engine (model.engine.loadVad(), .close()). */
export function loadModel(source: Source, opts?: CreateOptions): Promise<Model>;
