#!/bin/sh
# Runs whisperknot-bench against whisper.cpp on the same models, audio and
# thread count (see BENCHMARKS.md).
#
#   tools/bench-vs-whispercpp.sh BUILD_DIR WHISPERCPP_BIN [TYPES...]
#
# BUILD_DIR       a meson build of this repository (e.g. build, configured
#                 with -Dbuildtype=release for timings)
# WHISPERCPP_BIN  the bin folder tools/whispercpp-build.sh made
# TYPES           any of f16 q8_0 q4_0 (default: all three)
#
# 1. whisper-tiny-sized random-weight models (DIMS="tiny base small" for
#    the other sizes): wk-make-test-model writes each dims and
#    type as a whisper.cpp .bin (whisper.cpp loads these), whisperknot-convert
#    copies it bit for bit into a knot, so both engines run the very same
#    weights. Random weights give no meaningful text and the two engines
#    need not stop at the same token, so compare the STAGE timings there;
#    end-to-end runs are few (E2E_RUNS_RANDOM).
# 2. The default model, when its whisper.cpp export is available: set
#    DEFAULT_GGML to the f16 .bin (knots/train/export.py writes it). The
#    q8_0 / q4_0 .bin come from whisper.cpp's own whisper-quantize and are
#    copied bit for bit into knots. Here both engines produce the same text,
#    so the end-to-end figures count.
#
# ISA (avx512, avx2 or ref; default: each engine's widest) picks the
# instruction set of both sides: whisperknot's kernels at run time
# (WK_KERNELS=ISA), whisper.cpp's at build time, so WHISPERCPP_BIN must be a
# build for that ISA: tools/whispercpp-build.sh with CMAKE_ARGS (avx2:
# "-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON";
# ref: "-DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF
# -DGGML_F16C=OFF"; avx512: the native build on an AVX-512 machine). The
# script prints the ISA whisper.cpp reports it was built with beside ours.
#
# Environment: DIMS (the random models' sizes, any of tiny base small;
# default tiny), AUDIO (default: jfk.wav from the shared data), THREADS (2),
# RUNS (5), E2E_RUNS (RUNS), E2E_RUNS_RANDOM (1), WORK (a folder for the
# generated models; default a temporary one, removed afterwards), VOCAB
# (the vocabulary-only .bin for the random models), DEFAULT_GGML, RANDOM_MODELS
# (0: skip the random-weight models).
set -eu

if [ $# -lt 2 ]; then
  sed -n '2,41s/^# \{0,1\}//p' "$0" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
wcpp=$(cd "$2" && pwd)
shift 2
types=${*:-f16 q8_0 q4_0}

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
shared=${WK_SHARED_DATA:-$root/../shared/data}
audio=${AUDIO:-$shared/jfk.wav}
vocab=${VOCAB:-$shared/for-tests-ggml-tiny.en.bin}
threads=${THREADS:-2}
runs=${RUNS:-5}
e2e_runs=${E2E_RUNS:-$runs}
e2e_random=${E2E_RUNS_RANDOM:-1}

bench=$build/tools/whisperknot-bench
make_model=$build/tools/wk-make-test-model
convert=$build/knots/whisperknot-convert
for p in "$bench" "$make_model" "$convert" "$wcpp/whisper-cli"; do
  [ -x "$p" ] || { echo "$0: $p is missing (build it first)" >&2; exit 1; }
done
[ -f "$audio" ] || { echo "$0: no audio at $audio (set AUDIO)" >&2; exit 1; }

if [ -n "${WORK:-}" ]; then
  work=$WORK
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/wk-bench-vs.XXXXXX")
  trap 'rm -rf "$work"' EXIT INT TERM
fi

isa=${ISA:-}
case "$isa" in
  ''|avx512|avx2|ref) ;;
  *) echo "$0: ISA must be avx512, avx2 or ref" >&2; exit 2 ;;
esac
if [ -n "$isa" ]; then
  export WK_KERNELS=$isa
  # whisper.cpp's system_info line names the SIMD it was compiled with
  # (printed once a model and audio are read: the vocabulary-only model on
  # the first 0.1 s)
  wisa=$("$wcpp/whisper-cli" -m "$vocab" -f "$audio" -d 100 -t 1 2>&1 \
    | sed -n 's/.*system_info: *//p' | head -1)
  echo "# ISA $isa: whisperknot WK_KERNELS=$isa; whisper.cpp built with: ${wisa:-unknown}"
fi

commit=$(git -C "$root" describe --always --dirty 2>/dev/null || echo unknown)
echo "# whisperknot $commit vs $(cat "$wcpp/wk-whispercpp-version.txt" 2>/dev/null || echo whisper.cpp)"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) CPUs ($(sed -n 's/^model name[^:]*: //p' /proc/cpuinfo | head -1)), threads $threads, runs $runs"
echo

for dims in ${DIMS:-tiny}; do
  case "$dims" in
    tiny|base|small) ;;
    *) echo "$0: DIMS takes tiny, base and small" >&2; exit 2 ;;
  esac
  for t in $types; do
    [ "${RANDOM_MODELS:-1}" = 0 ] && break
    bin=$work/$dims-$t.bin
    knot=$work/$dims-$t.knot
    if [ ! -f "$knot" ]; then
      "$make_model" --dims "$dims" --type "$t" --vocab "$vocab" "$bin" \
        >/dev/null
      "$convert" --quiet "$bin" "$knot" >/dev/null
    fi
    echo "## whisper-$dims-sized random-weight model, $t (compare stages)"
    echo "# load: $(uptime | sed 's/.*load average: *//')"
    "$bench" -m "$knot" -f "$audio" -t "$threads" -r "$runs" \
      --e2e-runs "$e2e_random" --whispercpp "$wcpp" --ggml "$bin"
    echo
  done
done

if [ -n "${DEFAULT_GGML:-}" ]; then
  [ -f "$DEFAULT_GGML" ] || { echo "$0: no $DEFAULT_GGML" >&2; exit 1; }
  for t in $types; do
    bin=$work/default-$t.bin
    knot=$work/default-$t.knot
    if [ ! -f "$knot" ]; then
      if [ "$t" = f16 ]; then
        cp "$DEFAULT_GGML" "$bin"
      else
        "$wcpp/whisper-quantize" "$DEFAULT_GGML" "$bin" "$t" >/dev/null 2>&1
      fi
      # padded with silence, as whisper.cpp pads and as the model was trained;
      # openai's timestamp rule (no --timestamp-rule max), as whisper.cpp
      # decodes, so that both sides can give the same text
      "$convert" --quiet --pad-window silence --max-text-ctx 0 "$bin" "$knot" \
        >/dev/null
    fi
    echo "## default model, $t (same text on both sides: end-to-end counts)"
    "$bench" -m "$knot" -f "$audio" -t "$threads" -r "$runs" \
      --e2e-runs "$e2e_runs" --whispercpp "$wcpp" --ggml "$bin"
    echo
  done
else
  echo "## default model: skipped (set DEFAULT_GGML to its f16 whisper.cpp .bin;"
  echo "## knots/train/export.py writes it)"
fi
