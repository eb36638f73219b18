#!/bin/sh
# make-default-standin.sh MAKE_TEST_MODEL CONVERT VOCAB.bin OUT.knot
set -e
tmp="$4.tmp.bin"
"$1" --dims small-test --type f32 --seed 1 --vocab "$3" "$tmp" >/dev/null
"$2" --type q8_0 "$tmp" "$4" >/dev/null
rm -f "$tmp"
