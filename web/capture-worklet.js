// AudioWorklet processor: the microphone's first channel, resampled from
// the context's rate to 16 kHz with a windowed-sinc low-pass (cutoff just
// under 8 kHz, 32 taps at the input rate per output sample), posted to the
// page in 40 ms blocks with the context time of their first sample. (A
// block's last sample waits for the block to fill before the engine sees
// it: 100 ms blocks put up to 0.1 s, 50 ms on average, into every partial's
// delay; 25 messages a second cost the worker nothing next to a run.)
const OUT_RATE = 16000;
const BLOCK = 640;
const HALF = 16; // taps each side

class CaptureResampler extends AudioWorkletProcessor {
  constructor() {
    super();
    this.step = sampleRate / OUT_RATE; // input samples per output sample
    this.cutoff = Math.min(1, 1 / this.step) * 0.95; // of the input Nyquist
    this.hist = new Float32Array(0); // input not yet consumed (plus taps)
    this.pos = HALF; // position of the next output in hist
    this.out = new Float32Array(BLOCK);
    this.n = 0;
    this.firstTime = 0;
  }

  kernel(x) {
    if (x === 0) return this.cutoff;
    const w = 0.5 + 0.5 * Math.cos((Math.PI * x) / (HALF + 1)); // Hann
    return (Math.sin(Math.PI * this.cutoff * x) / (Math.PI * x)) * w;
  }

  process(inputs) {
    const ch = inputs[0] && inputs[0][0];
    if (!ch) return true;
    const histLen = this.hist.length;
    const h = new Float32Array(histLen + ch.length);
    h.set(this.hist);
    h.set(ch, this.hist.length);
    let p = this.pos;
    while (p + HALF + 1 < h.length) {
      const c = Math.floor(p), frac = p - c;
      let acc = 0;
      for (let t = -HALF + 1; t <= HALF; t++) acc += h[c + t] * this.kernel(t - frac);
      if (this.n === 0)
        // the context time of this sample (currentTime is this quantum's
        // first input sample); the page maps it to its clock
        this.firstTime = currentTime + (c - histLen) / sampleRate;
      this.out[this.n++] = acc;
      if (this.n === BLOCK) {
        this.port.postMessage({ samples: this.out.slice(), due: this.firstTime });
        this.n = 0;
      }
      p += this.step;
    }
    const keep = Math.max(0, Math.floor(p) - HALF);
    this.hist = h.slice(keep);
    this.pos = p - keep;
    return true;
  }
}

registerProcessor('whisperknot-capture', CaptureResampler);
