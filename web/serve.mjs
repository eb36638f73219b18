#!/usr/bin/env node
// node web/serve.mjs [PORT]: serves the source tree read-only over HTTP on
// 127.0.0.1 (default port 8080) for the page at /web/, with the headers a
// page needs for SharedArrayBuffer (COOP/COEP), so that a threaded build
// could run too. Open http://127.0.0.1:8080/web/ (a microphone needs
// localhost or HTTPS).
import http from 'node:http';
import { createReadStream, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const port = +(process.argv[2] ?? process.env.PORT ?? 8080);
const TYPES = {
  '.html': 'text/html; charset=utf-8', '.mjs': 'text/javascript', '.js': 'text/javascript',
  '.wasm': 'application/wasm', '.json': 'application/json', '.css': 'text/css',
  '.wav': 'audio/wav', '.knot': 'application/octet-stream', '.bin': 'application/octet-stream',
};

const server = http.createServer((req, res) => {
  let rel;
  try {
    rel = decodeURIComponent(new URL(req.url, 'http://x').pathname);
  } catch {
    res.writeHead(400).end();
    return;
  }
  if (rel.endsWith('/')) rel += 'index.html';
  const file = path.resolve(root, '.' + rel);
  // nothing outside the tree, nothing hidden (.git)
  if (!file.startsWith(root + path.sep) || file.split(path.sep).some((p) => p.startsWith('.'))) {
    res.writeHead(403).end();
    return;
  }
  let st;
  try {
    st = statSync(file);
  } catch {
    res.writeHead(404).end('not found');
    return;
  }
  if (!st.isFile()) {
    res.writeHead(301, { Location: rel + '/' }).end();
    return;
  }
  res.writeHead(200, {
    'Content-Type': TYPES[path.extname(file)] ?? 'application/octet-stream',
    'Content-Length': st.size,
    'Cross-Origin-Opener-Policy': 'same-origin',
    'Cross-Origin-Embedder-Policy': 'require-corp',
    'Cache-Control': 'no-cache',
  });
  if (req.method === 'HEAD') res.end();
  else createReadStream(file).pipe(res);
});
server.listen(port, '127.0.0.1', () => {
  console.log(`serving ${root} at http://127.0.0.1:${server.address().port}/web/`);
});
