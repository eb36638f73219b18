#!/bin/sh
# Regenerates sample.wav, the example audio of the README's main command and of
# the default-model test: three held-out sentences (never trained on; from
# knots/train/heldout/sentences.txt, fortune(6) data, BSD licence) read by
# flite's slt voice (CMU ARCTIC, BSD-style licence; one of the default model's
# training voices), 0.8 s of silence between them, 16 kHz mono s16le.
# Needs flite and sox (Debian packages). The reference text is sample.txt.
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
i=0
while IFS= read -r line; do
  i=$((i + 1))
  flite -voice slt -t "$line" -o "$tmp/$i.wav"
  sox -q "$tmp/$i.wav" -r 16000 -b 16 -c 1 "$tmp/s$i.wav" norm -1 pad 0 0.8
done < sample.txt
sox -q "$tmp"/s*.wav -r 16000 -b 16 -c 1 sample.wav pad 0.3 0
soxi sample.wav | grep -E 'Duration|Sample Rate'
