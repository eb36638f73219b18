#!/bin/sh
# Prints what the microphone hears (autoaudiosrc: PulseAudio, PipeWire or
# ALSA). LATENCY (ms, default 1000) is the element's latency property: how
# long after a word its text may come.
#
#   examples/microphone.sh [MODEL.knot]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${GST_PLUGIN_PATH:=$here/../${BUILD:-build}/gst-plugin}"
export GST_PLUGIN_PATH

model=${1:+model=$1}
# srtenc (gst-plugins-bad) gives one block per word with its times;
# without it the element writes plain lines (text-lines=true).
if gst-inspect-1.0 srtenc >/dev/null 2>&1; then
  out="srtenc ! fdsink fd=1 sync=false"
  lines=""
else
  # plain text: words one space apart, a line per segment or utterance
  out="fdsink fd=1 sync=false"
  lines=text-lines=true
fi
# shellcheck disable=SC2086
exec gst-launch-1.0 -q autoaudiosrc ! audioconvert ! audioresample ! \
  queue ! whisperknot latency="${LATENCY:-1000}" $model $lines ! $out
