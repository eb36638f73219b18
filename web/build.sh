#!/usr/bin/env bash
# Builds the WebAssembly engine: the meson project cross-built with
# web/wasm32-wasi.ini into build-wasm/ (override with WK_WASM_BUILD), then
# copied next to web/whisperknot.mjs, where the module looks for it.
# Needs clang, lld, wasi-libc and libclang-rt-14-dev-wasm32 (bootstrap.sh
# installs them); with clang-19, lld-19, libclang-rt-19-dev-wasm32 and
# libsimde-dev it builds with clang 19 and makes whisperknot-relaxed.wasm
# and whisperknot-threads-relaxed.wasm too (web/README.md); npm ci in web/
# for pako.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${WK_WASM_BUILD:-build-wasm}
if [ ! -f "$dir/build.ninja" ]; then
  cross=(--cross-file web/wasm32-wasi.ini)
  # clang 19 (Debian 12's clang-19) makes the relaxed module as well;
  # WK_WASM_CLANG19=0 keeps Debian 12's default clang 14
  if [ "${WK_WASM_CLANG19:-1}" != 0 ] && command -v clang-19 >/dev/null; then
    cross+=(--cross-file web/clang-19.ini)
  fi
  meson setup "$dir" "${cross[@]}" ${WK_WASM_MESON_ARGS:-}
fi
ninja -C "$dir" ${NINJA_FLAGS:-}
cp "$dir/web/whisperknot.wasm" "$dir/web/whisperknot-threads.wasm" web/
# the relaxed modules, where the compiler made them (clang >= 16,
# libsimde-dev)
for f in whisperknot-relaxed.wasm whisperknot-threads-relaxed.wasm; do
  rm -f "web/$f"
  if [ -f "$dir/web/$f" ]; then
    cp "$dir/web/$f" web/
  fi
done
if [ ! -d web/node_modules/pako ]; then
  (cd web && npm ci --no-audit --no-fund)
fi
for f in web/whisperknot.wasm web/whisperknot-threads.wasm web/whisperknot-relaxed.wasm \
    web/whisperknot-threads-relaxed.wasm; do
  [ -f "$f" ] && echo "$f: $(stat -c %s "$f") bytes"
done
if [ ! -f web/whisperknot-relaxed.wasm ]; then
  echo "(no web/whisperknot-relaxed.wasm: it needs clang >= 16 and libsimde-dev, see web/README.md)"
fi
