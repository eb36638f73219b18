#!/usr/bin/env bash
# Builds the WebAssembly engine: the meson project cross-built with
# web/wasm32-wasi.ini into build-wasm/ (override with WK_WASM_BUILD), then
# copied next to web/whisperknot.mjs, where the module looks for it.
# Needs clang, lld, wasi-libc and libclang-rt-14-dev-wasm32 (bootstrap.sh
# installs them); npm ci in web/ for pako.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${WK_WASM_BUILD:-build-wasm}
if [ ! -f "$dir/build.ninja" ]; then
  meson setup "$dir" --cross-file web/wasm32-wasi.ini ${WK_WASM_MESON_ARGS:-}
fi
ninja -C "$dir" ${NINJA_FLAGS:-}
cp "$dir/web/whisperknot.wasm" "$dir/web/whisperknot-threads.wasm" web/
if [ ! -d web/node_modules/pako ]; then
  (cd web && npm ci --no-audit --no-fund)
fi
echo "web/whisperknot.wasm: $(stat -c %s web/whisperknot.wasm) bytes, web/whisperknot-threads.wasm: $(stat -c %s web/whisperknot-threads.wasm) bytes"
