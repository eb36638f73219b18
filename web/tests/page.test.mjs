// The web page in headless Chromium (Debian's chromium, driven by
// playwright-core) with examples/data/sample.wav as a fake microphone: the
// live captions on the page become the words the same module transcribes
// offline from the sample, partial words showing before they are
// committed; then the file picker transcribes sample.wav. Screenshots are
// kept ($WK_WASM_BUILD/page.png, page-file.png). Skipped where no Chromium
// is installed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Whisperknot } from '../whisperknot.mjs';
import { defaultModel, root, sampleWav, wasmBuild } from './helpers.mjs';

const chromium = ['/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p) => existsSync(p));
let server, base, browser;

before(async () => {
  if (!chromium) return;
  server = spawn(process.execPath, [path.join(root, 'web/serve.mjs'), '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  base = await new Promise((resolve, reject) => {
    server.stdout.on('data', (d) => {
      const m = /(http:\/\/127\.0\.0\.1:\d+)\//.exec(String(d));
      if (m) resolve(m[1]);
    });
    server.on('exit', (c) => reject(new Error(`serve.mjs exited ${c}`)));
  });
});

after(async () => {
  await browser?.close();
  server?.kill();
});

const words = (s) => s.toLowerCase().replace(/[^a-z' ]/g, ' ').split(/\s+/).filter(Boolean);

// The words of the sample as this module hears it offline (whole file,
// default settings): what the live path has to deliver. Not the sample's
// script: the default model gets about half of its first sentence right
// offline, and a test of the page must not pass or fail on the model's
// hearing (a first-sentence check against the script did, by one word).
// Both tests use them: transcribed once.
let offline = null;
const offlineWords = () => (offline ??= transcribeOffline());

async function transcribeOffline() {
  const wk = await Whisperknot.create();
  const model = await wk.loadModel(defaultModel);
  const stream = model.createStream({ textLines: true });
  stream.feed(wk.parseWav(readFileSync(sampleWav)).samples);
  stream.finish();
  const text = stream.takeCues().filter((c) => c.kind === 'text').map((c) => c.text).join(' ');
  stream.free();
  model.free();
  return [...new Set(words(text))];
}

test('live captions from a fake microphone hold the words offline transcription gives', { skip: !chromium && 'no chromium', timeout: 240000 }, async (t) => {
  const { chromium: pw } = await import('playwright-core');
  browser = await pw.launch({
    executablePath: chromium,
    args: ['--use-fake-device-for-media-stream', '--use-fake-ui-for-media-stream',
      `--use-file-for-fake-audio-capture=${sampleWav}`, '--autoplay-policy=no-user-gesture-required',
      '--no-sandbox'],
  });
  const page = await browser.newPage();
  const log = [];
  page.on('console', (m) => log.push(m.text()));
  page.on('pageerror', (e) => log.push(String(e)));
  await page.goto(`${base}/web/`);
  await page.waitForSelector('body[data-ready="1"]', { timeout: 120000 });
  await page.click('#mic');
  await page.waitForSelector('body[data-listening="1"]', { timeout: 20000 });

  // sample.wav loops as the microphone; the captions of one pass at least
  // must hold many of the words offline transcription finds in it. Live
  // runs hear cut windows: one pass held 47-62% of them in runs seen on
  // this page (the live policy differs from offline by ~50% WER on this
  // sample, wk-live-latency), a stalled or garbled path next to none; 40%.
  const expected = await offlineWords();
  const enough = Math.ceil(expected.length * 0.4);
  let sawPartial = false, committed = '', firstPartial = null, firstWord = null;
  const t0 = Date.now();
  while (Date.now() - t0 < 150000) {
    const { c, p } = await page.evaluate(() => ({
      c: [...document.querySelectorAll('#captions .committed')].map((e) => e.textContent).join(' '),
      p: document.querySelector('#partial').textContent,
    }));
    if (p.trim()) sawPartial = true;
    if (p.trim() && firstPartial === null) firstPartial = (Date.now() - t0) / 1000;
    if (c.trim() && firstWord === null) firstWord = (Date.now() - t0) / 1000;
    committed = c;
    const got = new Set(words(c));
    // listen to the whole sample once (15.5 s) at least
    if (expected.filter((w) => got.has(w)).length >= enough && Date.now() - t0 >= 16000) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  await page.screenshot({ path: path.join(wasmBuild, 'page.png'), fullPage: true });
  const got = new Set(words(committed));
  const hit = expected.filter((w) => got.has(w));
  assert.ok(hit.length >= enough,
    `captions "${committed}" hold ${hit.length} of the ${expected.length} words of "${expected.join(' ')}"\n${log.join('\n')}`);
  t.diagnostic(`captions hold ${hit.length} of the ${expected.length} words offline transcription finds`);
  assert.ok(sawPartial, 'partial words were shown before they were committed');
  const stats = await page.textContent('#stats');
  assert.match(stats, /real-time factor/);
  t.diagnostic(`page stats: ${stats}`);
  t.diagnostic(`from the microphone's start: first partial ${firstPartial} s, first committed word ${firstWord} s`);
  // the page's own measure: how far behind the speech (the end of its last
  // word's audio) each partial was when shown
  const lag = JSON.parse((await page.getAttribute('body', 'data-partial-lag')) ?? 'null');
  assert.ok(lag && lag.n > 0, 'the page measured its partials');
  t.diagnostic(`partials behind the speech: median ${lag.median.toFixed(2)} s, 95% ${lag.p95.toFixed(2)} s, ` +
    `first ${lag.first.toFixed(2)} s, over ${lag.n} updates`);
  // The live policy aims at latency (2 s) from a word's end to its
  // commit; on a loaded 2-core machine (the engine near real time) runs
  // come late and so do some words (seen: 5.7 s). A stalled pipeline is
  // what this bound catches; the figure itself is reported above.
  const maxDelay = +(await page.getAttribute('body', 'data-max-delay'));
  t.diagnostic(`largest word delay ${maxDelay.toFixed(2)} s`);
  assert.ok(maxDelay <= 10.0, `a word took ${maxDelay} s to be committed`);
});

test('the file picker transcribes a WAV file', { skip: !chromium && 'no chromium', timeout: 240000 }, async () => {
  const { chromium: pw } = await import('playwright-core');
  const b = await pw.launch({ executablePath: chromium, args: ['--no-sandbox'] });
  try {
    const page = await b.newPage();
    await page.goto(`${base}/web/`);
    await page.waitForSelector('body[data-ready="1"]', { timeout: 120000 });
    await page.setInputFiles('#file', sampleWav);
    await page.waitForSelector('body[data-file-done="1"]', { timeout: 180000 });
    await page.screenshot({ path: path.join(wasmBuild, 'page-file.png'), fullPage: true });
    const text = await page.evaluate(() =>
      [...document.querySelectorAll('#captions .committed')].map((e) => e.textContent).join(' '));
    // the browser resamples the file itself (OfflineAudioContext), so the
    // samples are not the reader's: the words, not the tokens
    const want = await offlineWords();
    const got = new Set(words(text));
    const hit = want.filter((w) => got.has(w));
    assert.ok(hit.length >= Math.ceil(want.length * 0.8), `"${text}": ${hit.length} of the ${want.length} words of "${want.join(' ')}"`);
    assert.match(await page.textContent('#status'), /Transcribed 15\.\d s of audio/);
  } finally {
    await b.close();
  }
});
