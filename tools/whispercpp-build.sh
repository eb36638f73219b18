#!/bin/sh
# Builds a whisper.cpp checkout for comparing it with whisperknot
# (see BENCHMARKS.md). Nothing is downloaded: you supply the checkout, e.g.
#
#   git clone https://github.com/ggml-org/whisper.cpp /somewhere/whisper.cpp
#   tools/whispercpp-build.sh /somewhere/whisper.cpp [BUILD_DIR]
#
# It configures a CPU-only Release build the way a user would (cmake
# defaults: GGML_NATIVE=ON, OpenMP when available, static libraries),
# builds whisper-cli, whisper-bench and whisper-quantize, then compiles
# tools/whispercpp-stages.c against the result as wk-whispercpp-stages
# (whisper.cpp's stages timed with whisperknot-bench's protocol).
#
# BUILD_DIR defaults to WHISPERCPP/build-wk. The programs end up in
# BUILD_DIR/bin, which is what `whisperknot-bench --whispercpp` takes.
# Environment: JOBS (default 2), NICE (default 10), CMAKE_ARGS (extra
# arguments for the configure step, e.g. "-DGGML_NATIVE=OFF").
set -eu

if [ $# -lt 1 ] || [ ! -f "$1/include/whisper.h" ]; then
  echo "usage: $0 /path/to/whisper.cpp [BUILD_DIR]" >&2
  echo "(a whisper.cpp source checkout: it must contain include/whisper.h)" >&2
  exit 2
fi

src=$(cd "$1" && pwd)
build=${2:-$src/build-wk}
jobs=${JOBS:-2}
nice=${NICE:-10}
here=$(cd "$(dirname "$0")" && pwd)

# shellcheck disable=SC2086 # CMAKE_ARGS is a list of arguments
nice -n "$nice" cmake -S "$src" -B "$build" \
  -DCMAKE_BUILD_TYPE=Release \
  -DBUILD_SHARED_LIBS=OFF \
  -DWHISPER_BUILD_TESTS=OFF \
  -DWHISPER_BUILD_SERVER=OFF \
  -DWHISPER_SDL2=OFF \
  -DWHISPER_CURL=OFF \
  ${CMAKE_ARGS:-}
nice -n "$nice" cmake --build "$build" -j "$jobs" \
  --target whisper-cli whisper-bench whisper-quantize

# The stage driver: C against whisper.h, linked with the static libraries
# (C++ and OpenMP runtimes included, as whisper.cpp's own tools are).
libs=""
for l in src/libwhisper.a ggml/src/libggml.a ggml/src/libggml-cpu.a \
    ggml/src/libggml-base.a; do
  [ -f "$build/$l" ] || { echo "$0: $build/$l is missing" >&2; exit 1; }
  libs="$libs $build/$l"
done
openmp=""
if grep -q '^GGML_OPENMP:BOOL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  openmp="-fopenmp"
fi
# shellcheck disable=SC2086
nice -n "$nice" ${CC:-cc} -O2 -std=c11 -D_GNU_SOURCE \
  -I"$src/include" -I"$src/ggml/include" \
  -o "$build/bin/wk-whispercpp-stages" "$here/whispercpp-stages.c" \
  $libs $openmp -lstdc++ -lm -lpthread

# whisperknot-bench prints this line beside whisper.cpp's figures.
version=$(git -C "$src" describe --always --dirty 2>/dev/null || echo 'unknown version')
native=$(sed -n 's/^GGML_NATIVE:BOOL=//p' "$build/CMakeCache.txt" 2>/dev/null)
echo "whisper.cpp $version, Release, GGML_NATIVE=${native:-?}${openmp:+, OpenMP}" \
  > "$build/bin/wk-whispercpp-version.txt"

echo "$(cat "$build/bin/wk-whispercpp-version.txt") built in $build/bin:"
ls "$build/bin"
