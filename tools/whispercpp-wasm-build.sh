#!/bin/sh
# Builds whisper.cpp as WebAssembly with Debian's emscripten, for comparing
# it with whisperknot's own wasm engine (web/bench.mjs --whispercpp, see
# BENCHMARKS.md). Nothing is downloaded and nothing of whisper.cpp is
# committed: you supply the checkout, e.g.
#
#   apt-get install emscripten
#   git clone https://github.com/ggml-org/whisper.cpp /somewhere/whisper.cpp
#   tools/whispercpp-wasm-build.sh /somewhere/whisper.cpp [BUILD_DIR]
#
# It configures whisper.cpp the way its own wasm examples are built
# (emcmake, Release, static, ggml's CPU backend with -msimd128, pthreads as
# its CMakeLists requires for emscripten), builds the whisper and ggml
# libraries, then compiles tools/whispercpp-stages.c against them as
# BUILD_DIR/bin/wk-whispercpp-stages.js (Node.js, the host file system
# through NODERAWFS, so it reads the same model and audio files as the
# native programs). Run it as
#
#   node --no-experimental-fetch BUILD_DIR/bin/wk-whispercpp-stages.js \
#     -m MODEL.bin -a AUDIO.f32 -t 1 -e
#   node --no-experimental-fetch BUILD_DIR/bin/whisper-quantize.js \
#     MODEL-f16.bin MODEL-q8_0.bin q8_0
#
# (--no-experimental-fetch: Debian's emscripten 3.1.6 loads the .wasm with
# fetch() whenever it exists, and Node.js 18+'s fetch cannot read files.)
#
# BUILD_DIR defaults to WHISPERCPP/build-wk-wasm. Environment: JOBS
# (default 2), NICE (default 10).
set -eu

if [ $# -lt 1 ] || [ ! -f "$1/include/whisper.h" ]; then
  echo "usage: $0 /path/to/whisper.cpp [BUILD_DIR]" >&2
  echo "(a whisper.cpp source checkout: it must contain include/whisper.h)" >&2
  exit 2
fi
command -v emcmake >/dev/null || {
  echo "$0: emcmake not found (apt-get install emscripten)" >&2
  exit 1
}

src=$(cd "$1" && pwd)
build=${2:-$src/build-wk-wasm}
jobs=${JOBS:-2}
nice=${NICE:-10}
here=$(cd "$(dirname "$0")" && pwd)
# emscripten's JavaScript passes need Debian's node-acorn, which a Node.js
# from elsewhere does not look for
export NODE_PATH=${NODE_PATH:+$NODE_PATH:}/usr/share/nodejs

nice -n "$nice" emcmake cmake -S "$src" -B "$build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DWHISPER_BUILD_TESTS=OFF \
  -DWHISPER_BUILD_EXAMPLES=OFF \
  -DWHISPER_BUILD_SERVER=OFF \
  -DWHISPER_SDL2=OFF \
  -DWHISPER_CURL=OFF \
  -DGGML_OPENMP=OFF
nice -n "$nice" cmake --build "$build" -j "$jobs" --target whisper

libs=""
for l in src/libwhisper.a ggml/src/libggml.a ggml/src/libggml-cpu.a \
    ggml/src/libggml-base.a; do
  [ -f "$build/$l" ] || { echo "$0: $build/$l is missing" >&2; exit 1; }
  libs="$libs $build/$l"
done
mkdir -p "$build/bin"
# One thread is what is compared; the pool is there because the libraries
# are built with -pthread.
nice -n "$nice" emcc -O3 -msimd128 -pthread -std=c11 -D_GNU_SOURCE \
  -I"$src/include" -I"$src/ggml/include" \
  -c "$here/whispercpp-stages.c" -o "$build/wk-whispercpp-stages.o"
# (linked by em++: the libraries are C++)
# shellcheck disable=SC2086
nice -n "$nice" em++ -O3 -msimd128 -pthread \
  "$build/wk-whispercpp-stages.o" $libs \
  -s NODERAWFS=1 -s INITIAL_MEMORY=1073741824 \
  -s PTHREAD_POOL_SIZE=2 -s EXIT_RUNTIME=1 -s TOTAL_STACK=5242880 \
  -o "$build/bin/wk-whispercpp-stages.js"
# whisper.cpp's own quantizer (examples/quantize), for the q8_0/q4_0 .bin of
# a model: built the same way, so it runs in Node.js with the host's files
# shellcheck disable=SC2086
nice -n "$nice" em++ -O2 -msimd128 -pthread -std=c++17 \
  -I"$src/include" -I"$src/ggml/include" -I"$src/examples" \
  "$src/examples/quantize/quantize.cpp" "$src/examples/common-ggml.cpp" \
  "$src/examples/common.cpp" $libs \
  -s NODERAWFS=1 -s INITIAL_MEMORY=1073741824 -s PTHREAD_POOL_SIZE=2 \
  -s EXIT_RUNTIME=1 -s TOTAL_STACK=5242880 \
  -o "$build/bin/whisper-quantize.js"
echo "built $build/bin/wk-whispercpp-stages.js and whisper-quantize.js"
echo "(run them with node --no-experimental-fetch: emscripten $(emcc --version \
  | sed -n '1s/.* \([0-9][0-9.]*\) .*/\1/p') predates Node.js's fetch)"
