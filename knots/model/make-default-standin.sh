#!/bin/sh
# make-default-standin.sh MAKE_TEST_MODEL CONVERT VOCAB.bin OUT.knot
# The vocabulary .bin gives the layout and filters; its token bytes are
# lossy (U+FFFD for byte fragments), so the real ones come from
# gpt2.tiktoken beside it.
set -e
tmp="$4.tmp.bin"
"$1" --dims small-test --type f32 --seed 1 --vocab "$3" "$tmp" >/dev/null
"$2" --type q8_0 --vocab "$(dirname "$3")/gpt2.tiktoken" "$tmp" "$4" >/dev/null
rm -f "$tmp"
