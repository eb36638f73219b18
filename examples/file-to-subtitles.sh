#!/bin/sh
# Writes subtitles for an audio (or video) file: OUT.srt with srtenc, OUT.vtt
# with webvttenc (both in gst-plugins-bad: apt-get install
# gstreamer1.0-plugins-bad).
#
#   examples/file-to-subtitles.sh FILE OUT.srt|OUT.vtt [MODEL.knot]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${GST_PLUGIN_PATH:=$here/../${BUILD:-build}/gst-plugin}"
export GST_PLUGIN_PATH

[ $# -ge 2 ] || { echo "usage: $0 FILE OUT.srt|OUT.vtt [MODEL.knot]" >&2; exit 2; }
file=$1
out=$2
model=${3:+model=$3}
case "$out" in
  *.srt) enc=srtenc ;;
  *.vtt) enc=webvttenc ;;
  *) echo "$0: OUT must end in .srt or .vtt" >&2; exit 2 ;;
esac
if ! gst-inspect-1.0 "$enc" >/dev/null 2>&1; then
  echo "$0: $enc is missing: apt-get install gstreamer1.0-plugins-bad" >&2
  exit 1
fi
# decodebin's audio pad only: a video file's picture is left unlinked
# shellcheck disable=SC2086
exec gst-launch-1.0 -q filesrc location="$file" ! decodebin ! \
  audio/x-raw ! audioconvert ! audioresample ! whisperknot $model ! \
  "$enc" ! filesink location="$out"
