#!/bin/sh
# Pack the TTS programs synth.py uses (espeak-ng, flite, festival with its English
# voices), their shared libraries and data, into one .tar.xz that runs on a machine
# where they are not installed and nothing can be downloaded (a lent GPU machine):
#   knots/train/tts-bundle.sh OUT.tar.xz [engines]
#   mkdir P && tar -xJf OUT.tar.xz -C P && WK_TTS_PREFIX=P python3 knots/train/synth.py ...
# engines: a space-separated subset of "espeak-ng flite festival" (default all three;
# synth.py gives a missing festival's share to flite).
# glibc, libstdc++ and libgcc_s are left out: the target's own (newer) ones serve.
# Licences: espeak-ng GPL-3+, flite BSD-style (CMU), festival X11-style; the voices
# are those listed in knots/train/README.md. The bundle is never committed.
set -eu
out=$(realpath -m "$1")
engines=${2:-espeak-ng flite festival}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/bin" "$tmp/lib"
for b in $engines; do
  cp -L "$(command -v $b)" "$tmp/bin/"
  ldd "$(command -v $b)" | awk '/=> \//{print $3}' | while read -r l; do
    case "$(basename "$l")" in
      libc.so*|libm.so*|ld-linux*|libstdc++*|libgcc_s*|libpthread*|libdl.so*|librt.so*) ;;
      *) cp -L "$l" "$tmp/lib/" ;;
    esac
  done
done
case " $engines " in *" espeak-ng "*)
  # English only (ESPEAK_DATA_PATH points at the folder holding espeak-ng-data)
  src=/usr/lib/x86_64-linux-gnu/espeak-ng-data
  mkdir -p "$tmp/espeak-ng-data"
  cp -r "$src/en_dict" "$src/phondata" "$src/phonindex" "$src/phontab" "$src/intonations" \
    "$src/voices" "$src/lang" "$tmp/espeak-ng-data/" ;;
esac
case " $engines " in *" festival "*)
  # its Scheme library, lexicons and the voices synth.py trains on (--libdir)
  cp -rL /usr/share/festival "$tmp/festival" ;;
esac
XZ_OPT=-9 tar -C "$tmp" -cJf "$out" .
ls -l "$out"
