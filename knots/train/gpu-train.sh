#!/bin/bash
# Train on a lent GPU machine for a fixed wall-clock time, synthesizing the speech on
# that machine's CPUs meanwhile (it has no TTS packages and no registry to fetch them).
#
#   knots/train/gpu-train.sh BUNDLE_DIR OUT_DIR SECONDS [train.py options]
#
# BUNDLE_DIR holds tts.tar.xz (knots/train/tts-bundle.sh) and text.tar.xz (the sentence
# pools synth.py texts writes to knots/work/text/), optionally shared.tar.xz and
# speech.tar (real training speech, knots/train/speechpack.py pack: decoded here into
# the trainer's data/real; REAL_IN_POOL=1 also links it into data/train, which is all
# the GPU's --device-pool reads). Training starts from the committed knot + side file
# (train.py). The run stops SECONDS after it starts, leaving
# OUT_DIR/model-f16.pt.partNN (join with cat into knots/work/model-f16.pt),
# OUT_DIR/log.txt (training log) and OUT_DIR/synth.log. It gives up within about a
# minute if the synthesizers or the GPU do not work, so that a retry still fits.
set -u
T0=$(date +%s)
BUNDLE=$(realpath "$1"); OUT=$(realpath "$2"); SECONDS_TOTAL=$3; shift 3
cd "$(dirname "$0")/../.." || exit 1
export WK_TRAIN_WORK=/tmp/wk-work WK_TTS_PREFIX=/tmp/wk-tts WK_TRAIN_LOG="$OUT/log.txt"
export PYTHONUNBUFFERED=1 OMP_NUM_THREADS=1
PY=${PYTHON:-python3}
mkdir -p "$WK_TRAIN_WORK/text" "$WK_TTS_PREFIX" "$OUT"
tar -xJf "$BUNDLE/tts.tar.xz" -C "$WK_TTS_PREFIX" || exit 1
tar -xJf "$BUNDLE/text.tar.xz" -C "$WK_TRAIN_WORK/text" || exit 1
# the GPT-2 vocabulary and Whisper's mel filters (../shared/data here) when they don't travel
if [ -f "$BUNDLE/shared.tar.xz" ]; then
  export WK_SHARED_DATA=/tmp/wk-shared
  mkdir -p "$WK_SHARED_DATA" && tar -xJf "$BUNDLE/shared.tar.xz" -C "$WK_SHARED_DATA" || exit 1
fi
echo "setup: $(getconf _NPROCESSORS_ONLN) CPUs, bundle unpacked in $(( $(date +%s) - T0 )) s"

# the synthesizers must run here before anything else is started
$PY - <<'PYEOF' || exit 1
import os, random, sys, tempfile
sys.path.insert(0, "knots/train")
sys.path.insert(0, "knots")
import synth
from whisper_ref import audio, tokenizer
tokenizer.get_tokenizer().encode(" check")
audio.mel_filters()
rng = random.Random(1)
with tempfile.TemporaryDirectory() as d:
    voices = [{"engine": "espeak", "voice": "en-us", "variant": "m3", "speed": 160, "pitch": 50}]
    if os.path.exists(os.path.join(os.environ["WK_TTS_PREFIX"], "bin", "flite")):
        voices.append({"engine": "flite", "voice": "slt", "stretch": 1.0})
    for v in voices:
        w = synth.synth_batch(v, ["The quick brown fox jumps over the lazy dog."], d, 1.05)[0]
        if w is None or len(w) < 16000:
            sys.exit("synthesizer %s does not work here" % synth.voice_name(v))
        print("synth check %s: %.2f s" % (synth.voice_name(v), len(w) / 16000))
PYEOF

NPROD=${NPROD:-$(( $(getconf _NPROCESSORS_ONLN) - 2 ))}
[ "$NPROD" -lt 1 ] && NPROD=1
pids=()
for i in $(seq "$NPROD"); do
  nice -n 5 $PY knots/train/synth.py produce --shard-size 40 --seed "$((T0 + i))" \
    >> "$OUT/synth.log" 2>&1 &
  pids+=($!)
done
if [ -x "$WK_TTS_PREFIX/bin/flite" ]; then  # the held-out sets need flite's rms voice
  nice -n 5 $PY knots/train/synth.py eval --n 24 >> "$OUT/synth.log" 2>&1 &
  pids+=($!)
fi
trap 'kill "${pids[@]}" 2>/dev/null' EXIT

# real speech, while the synthesizers start (about 10 s on 16 cores)
if [ -f "$BUNDLE/speech.tar" ]; then
  $PY knots/train/speechpack.py unpack "$BUNDLE/speech.tar" "$WK_TRAIN_WORK/data/real" || exit 1
  if [ "${REAL_IN_POOL:-0}" = 1 ]; then
    mkdir -p "$WK_TRAIN_WORK/data/train"
    for f in "$WK_TRAIN_WORK"/data/real/shard-*.npz; do
      ln -s "$f" "$WK_TRAIN_WORK/data/train/shard-real-${f##*/shard-}"
    done
  fi
fi

DEVICE=${DEVICE:-cuda}  # DEVICE=cpu tries the whole run on a machine without a GPU
if [ "$DEVICE" = cuda ]; then
  $PY -c "import torch; assert torch.cuda.is_available(); print(torch.__version__, torch.cuda.get_device_name(0))" || exit 1
fi
BUDGET=$(( SECONDS_TOTAL - ($(date +%s) - T0) - 40 ))
echo "training for $BUDGET s with $NPROD synthesizers"
$PY knots/train/train.py --device "$DEVICE" --device-pool on --threads 2 --time-budget "$BUDGET" --out-dir "$OUT" "$@"
rc=$?
echo "train.py exit $rc after $(( $(date +%s) - T0 )) s; synthesized: $(ls $WK_TRAIN_WORK/data/train | wc -l) shards"
exit $rc
