#!/bin/sh
# Transcribes an audio file and prints the text with its times (SubRip) on
# standard output; without srtenc (gst-plugins-bad), the bare text.
#
#   examples/file-to-text.sh FILE [MODEL.knot]
#
# Any format GStreamer decodes will do; audioconvert and audioresample make
# it mono 16 kHz. Without MODEL, the element's default model is used
# ($WHISPERKNOT_MODEL, else the installed one). From a build tree, set
# GST_PLUGIN_PATH to the build's gst-plugin folder (BUILD=build by default).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${GST_PLUGIN_PATH:=$here/../${BUILD:-build}/gst-plugin}"
export GST_PLUGIN_PATH

[ $# -ge 1 ] || { echo "usage: $0 FILE [MODEL.knot]" >&2; exit 2; }
file=$1
model=${2:+model=$2}

if gst-inspect-1.0 srtenc >/dev/null 2>&1; then
  out="srtenc ! fdsink fd=1"
  lines=""
else
  # plain text: words one space apart, a line per segment or utterance
  out="fdsink fd=1"
  lines=text-lines=true
fi
# shellcheck disable=SC2086 # $model and $out are lists of words
exec gst-launch-1.0 -q filesrc location="$file" ! decodebin ! audioconvert ! \
  audioresample ! whisperknot $model $lines ! $out
