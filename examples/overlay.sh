#!/bin/sh
# Plays a video with its speech burned in as captions (textoverlay, from
# gstreamer1.0-x). The element's GAP events let textoverlay show frames
# while nobody speaks.
#
#   examples/overlay.sh VIDEO [MODEL.knot]
#
# VIDEOSINK (default autovideosink) picks the output, e.g.
# VIDEOSINK="fakesink sync=true" to run at real-time pace without a display.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${GST_PLUGIN_PATH:=$here/../${BUILD:-build}/gst-plugin}"
export GST_PLUGIN_PATH

[ $# -ge 1 ] || { echo "usage: $0 VIDEO [MODEL.knot]" >&2; exit 2; }
model=${2:+model=$2}
# shellcheck disable=SC2086
exec gst-launch-1.0 filesrc location="$1" ! decodebin name=d \
  d. ! queue ! videoconvert ! textoverlay name=o wait-text=false ! \
    videoconvert ! ${VIDEOSINK:-autovideosink} \
  d. ! queue ! audioconvert ! audioresample ! \
    whisperknot latency="${LATENCY:-1000}" $model ! o.text_sink
