#!/bin/sh
# Ship trained weights as the default model: the q8_0 knot with every key the
# model was trained with, and its side file, in one step.
#
#   knots/train/ship.sh CKPT.pt HEADS [BUILD]
#
# CKPT.pt  weights: average.py's output, the trainer's knots/work/model-f16.pt,
#          a GPU run's; its base name becomes the knot's general.name
# HEADS    alignment heads searched on these weights (knots/train/README.md:
#          `wk-word-times --search-heads`), e.g. 2:3,2:2,3:3,3:0,1:2
# BUILD    meson build dir with whisperknot-convert (default build)
#
# Writes knots/model/default.knot and knots/train/checkpoint/train-state.pt,
# then runs the default-model-meta test on it (tests/meson.build lists the
# keys it checks). The keys are written here and nowhere else because a knot
# that lacks one still runs: the one shipped on 2026-12-03 (0d65bd4) lost
# `--live-audio-ctx short` on the way and every live run encoded 30 s of
# context for nothing.
set -eu
[ $# -ge 2 ] || { sed -n 4,12p "$0" >&2; exit 2; }
ckpt=$1 heads=$2 build=${3:-build}
cd "$(dirname "$0")/../.."
name=$(basename "$ckpt" .pt)
out=knots/work/ship
mkdir -p "$out"
/usr/bin/python3 knots/train/export.py --ckpt "$ckpt" --out "$out/$name.bin"
"$build/knots/whisperknot-convert" --type q8_0 --pad-window silence \
  --max-text-ctx 0 --timestamp-rule max --live-audio-ctx short \
  --alignment-heads "$heads" "$out/$name.bin" knots/model/default.knot
/usr/bin/python3 knots/train/knotio.py side \
  --out knots/train/checkpoint/train-state.pt "$ckpt"
meson test -C "$build" --no-rebuild --print-errorlogs default-model-meta
/usr/bin/python3 knots/train/knotio.py info | tail -1
