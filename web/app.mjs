// The page: a worker runs the engine (worker.mjs), an AudioWorklet
// (capture-worklet.js) brings the microphone at 16 kHz; committed words
// are shown as final, the partial hypothesis in grey after them.
const params = new URLSearchParams(location.search);
const MODEL = params.get('model') ?? '../knots/model/default.knot';
// 0.9 s, not the engine's usual 2 s: the live policy runs the model every
// latency / 3, so partial words follow the speech by about that step plus
// a run (in headless Chromium on sample.wav, the worker warmed up: see
// BENCHMARKS.md; at 2 s partials trailed by 0.32 / 0.66 s median / p95),
// for more runs (real-time factor 0.3-0.45 on the loaded 2-core machine).
const LATENCY_MS = +(params.get('latency') ?? 900);

const $ = (id) => document.getElementById(id);
const worker = new Worker(new URL('./worker.mjs', import.meta.url), { type: 'module' });
let ctx = null, source = null, node = null, stream = null, clockOffsetMs = 0;
// the capture time (engine clock, s) of the live stream's first sample, and
// how far behind the speech each shown partial was: now minus the capture
// time of the end of its last word
let firstDue = null;
const partialLags = [];
let lineEl = $('line');
const partialEl = $('partial');

function status(s) { $('status').textContent = s; }

function newLine() {
  partialEl.remove();
  const p = document.createElement('p');
  lineEl = document.createElement('span');
  lineEl.className = 'committed';
  p.append(lineEl, ' ', partialEl);
  $('captions').append(p);
  partialEl.textContent = '';
}

// live: the live policy's figures; otherwise a file's (stages, tokens)
function showStats(s, extra = {}, live = true) {
  const busy = s.melSeconds + s.encoderSeconds + s.decoderSeconds + s.vadSeconds;
  const items = {
    'real-time factor': s.audioSeconds > 0 ? (busy / s.audioSeconds).toFixed(3) : '–',
    'audio': `${s.audioSeconds.toFixed(1)} s`,
    ...(live ? {
      'last word delay': `${s.lastDelaySeconds.toFixed(2)} s`,
      'max word delay': `${s.maxDelaySeconds.toFixed(2)} s`,
      'last run': `${s.lastRunSeconds.toFixed(2)} s`,
      'model runs': s.nRuns,
      'words': s.nCommitted,
      'speech heard': `${s.speechSeconds.toFixed(1)} s`,
    } : {
      'encoder': `${s.encoderSeconds.toFixed(2)} s`,
      'decoder': `${s.decoderSeconds.toFixed(2)} s`,
      'windows': s.nWindows,
      'tokens': s.nTokens,
    }),
    ...extra,
  };
  $('stats').replaceChildren(...Object.entries(items).map(([k, v]) => {
    const d = document.createElement('div');
    d.innerHTML = `<b></b><span></span>`;
    d.firstChild.textContent = v;
    d.lastChild.textContent = k;
    return d;
  }));
}

worker.onmessage = ({ data: m }) => {
  if (m.type === 'ready') {
    $('mic').disabled = false;
    $('file').disabled = false;
    const i = m.info;
    $('modelinfo').textContent = `${(i.fileBytes / 1e6).toFixed(1)} MB, ${i.nAudioLayer}+${i.nTextLayer} layers, ` +
      `width ${i.nAudioState}, ${i.multilingual ? 'multilingual' : 'English'}; kernels ${m.kernels}, ${m.threads} thread${m.threads > 1 ? 's' : ''}`;
    status('Ready.');
    document.body.dataset.ready = '1';
  } else if (m.type === 'words') {
    // the engine's cues: words with their spaces, and line ends
    for (const w of m.committed) {
      lineEl.textContent += w.text;
      if (w.lineEnd) newLine();
    }
    const shown = m.partial.map((w, i) =>
      ((i > 0 || lineEl.textContent) && w.spaceBefore ? ' ' : '') + w.text).join('');
    if (shown && shown !== partialEl.textContent && firstDue !== null) {
      const lag = (performance.timeOrigin + performance.now()) / 1000 - (firstDue + m.partial.at(-1).end / 16000);
      partialLags.push(lag);
      if (partialLags.length > 10000) partialLags.shift();
    }
    partialEl.textContent = shown;
    const sorted = [...partialLags].sort((a, b) => a - b);
    const q = (f) => sorted[Math.min(sorted.length - 1, Math.floor(f * sorted.length))];
    showStats(m.stats, sorted.length ? { 'partial lag (median / 95%)': `${q(0.5).toFixed(2)} / ${q(0.95).toFixed(2)} s` } : {});
    // for tests and tools: how far behind the speech partials were shown
    if (sorted.length) document.body.dataset.partialLag = JSON.stringify({ n: sorted.length, median: q(0.5), p95: q(0.95), first: partialLags[0] });
    // for tests and tools: the engine's own word delays
    document.body.dataset.maxDelay = m.stats.maxDelaySeconds;
    if (m.final) status('Stopped.');
  } else if (m.type === 'file-segment') {
    lineEl.textContent += (lineEl.textContent && m.spaceBefore ? ' ' : '') + m.text;
  } else if (m.type === 'file-done') {
    const s = m.stats;
    showStats(s, { 'wall time': `${m.seconds.toFixed(2)} s`,
      'speed': `${(s.audioSeconds / m.seconds).toFixed(1)}x real time` }, false);
    status(`Transcribed ${s.audioSeconds.toFixed(1)} s of audio in ${m.seconds.toFixed(2)} s.`);
    document.body.dataset.fileDone = '1';
  } else if (m.type === 'error') {
    status(`Error: ${m.message}`);
  }
};
worker.postMessage({ type: 'load', model: new URL(MODEL, location.href).href });

async function startMic() {
  stream = await navigator.mediaDevices.getUserMedia({
    audio: { channelCount: 1, echoCancellation: false, noiseSuppression: false, autoGainControl: false },
  });
  ctx = new AudioContext();
  await ctx.audioWorklet.addModule(new URL('./capture-worklet.js', import.meta.url));
  source = ctx.createMediaStreamSource(stream);
  node = new AudioWorkletNode(ctx, 'whisperknot-capture', { numberOfInputs: 1, numberOfOutputs: 0 });
  const syncClock = () => {
    const ts = ctx.getOutputTimestamp();
    if (ts.performanceTime) clockOffsetMs = ts.performanceTime - ts.contextTime * 1000;
  };
  syncClock();
  node.port.onmessage = ({ data }) => {
    syncClock();
    // capture time on the engine's clock (whisperknot.mjs clockSeconds)
    const due = (performance.timeOrigin + data.due * 1000 + clockOffsetMs) / 1000;
    if (firstDue === null) firstDue = due;
    worker.postMessage({ type: 'audio', samples: data.samples, due }, [data.samples.buffer]);
  };
  source.connect(node);
  firstDue = null;
  partialLags.length = 0;
  worker.postMessage({ type: 'live', latencyMs: LATENCY_MS });
  newLine();
  $('mic').textContent = 'Stop';
  status(`Listening (${ctx.sampleRate} Hz → 16 kHz)…`);
  document.body.dataset.listening = '1';
}

// the capture's pieces, as far as they were made
function releaseMic() {
  source?.disconnect();
  node?.disconnect();
  stream?.getTracks().forEach((t) => t.stop());
  ctx?.close();
  ctx = source = node = stream = null;
}

function stopMic() {
  releaseMic();
  worker.postMessage({ type: 'stop' });
  $('mic').textContent = 'Start microphone';
}

// ctx is set only once the permission prompt is answered: until then a
// second click would start a second capture
let starting = false;
$('mic').onclick = () => {
  if (starting) return;
  if (ctx) return stopMic();
  starting = true;
  $('mic').disabled = true;
  startMic().catch((e) => {
    releaseMic();
    status(`Microphone: ${e.message}`);
  }).finally(() => {
    starting = false;
    $('mic').disabled = false;
  });
};

$('file').onchange = async (ev) => {
  const f = ev.target.files[0];
  if (!f) return;
  status(`Decoding ${f.name}…`);
  try {
    // the browser decodes any format it knows and resamples to 16 kHz
    const bytes = await f.arrayBuffer();
    const tmp = new AudioContext();
    const buf = await tmp.decodeAudioData(bytes).finally(() => tmp.close());
    const off = new OfflineAudioContext(1, Math.ceil(buf.duration * 16000), 16000);
    const src = off.createBufferSource();
    src.buffer = buf;
    src.connect(off.destination);
    src.start();
    const samples = (await off.startRendering()).getChannelData(0);
    newLine();
    status(`Transcribing ${f.name} (${buf.duration.toFixed(1)} s)…`);
    worker.postMessage({ type: 'file', samples }, [samples.buffer]);
  } catch (e) {
    // a file the browser cannot decode (or an empty one)
    status(`Cannot transcribe ${f.name}: ${e.message}`);
  }
};
