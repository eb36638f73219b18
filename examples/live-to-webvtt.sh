#!/bin/sh
# Live captions written as a WebVTT file with webvttenc (gst-plugins-bad:
# apt-get install gstreamer1.0-plugins-bad), cue by cue as they are spoken.
#
#   examples/live-to-webvtt.sh file FILE OUT.vtt [MODEL.knot]
#       a file played at real-time pace (identity sync=true), as a
#       stand-in for a live source
#   examples/live-to-webvtt.sh rtp OUT.vtt [PORT] [MODEL.knot]
#       an RTP L16 stream (send one with "examples/rtp.sh send FILE")
#   examples/live-to-webvtt.sh mic OUT.vtt [MODEL.knot]
#       the microphone (Ctrl-C ends it; -e makes it finish the file)
#
# LATENCY (ms, default 1000) sets whisperknot's target delay; OUTPUT=phrase
# (the default here) gives one cue per phrase, OUTPUT=word one per word.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${GST_PLUGIN_PATH:=$here/../${BUILD:-build}/gst-plugin}"
export GST_PLUGIN_PATH

if ! gst-inspect-1.0 webvttenc >/dev/null 2>&1; then
  echo "$0: webvttenc is missing: apt-get install gstreamer1.0-plugins-bad" >&2
  exit 1
fi
wk="whisperknot latency=${LATENCY:-1000} output=${OUTPUT:-phrase}"
usage="usage: $0 file FILE OUT.vtt [MODEL] | rtp OUT.vtt [PORT] [MODEL] | mic OUT.vtt [MODEL]"

case "${1:-}" in
  file)
    [ $# -ge 3 ] || { echo "$usage" >&2; exit 2; }
    model=${4:+model=$4}
    # shellcheck disable=SC2086
    exec gst-launch-1.0 -q -e filesrc location="$2" ! decodebin ! \
      audio/x-raw ! audioconvert ! audioresample ! \
      audio/x-raw,rate=16000,channels=1 ! identity sync=true ! \
      $wk $model ! webvttenc ! filesink location="$3"
    ;;
  rtp)
    [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
    model=${4:+model=$4}
    caps="application/x-rtp,media=audio,clock-rate=16000,encoding-name=L16,\
encoding-params=1,channels=1,payload=96"
    # shellcheck disable=SC2086
    exec gst-launch-1.0 -q -e udpsrc port="${3:-5004}" caps="$caps" ! \
      rtpjitterbuffer latency=100 ! rtpL16depay ! audioconvert ! \
      audioresample ! $wk $model ! webvttenc ! filesink location="$2"
    ;;
  mic)
    [ $# -ge 2 ] || { echo "$usage" >&2; exit 2; }
    model=${3:+model=$3}
    # shellcheck disable=SC2086
    exec gst-launch-1.0 -q -e autoaudiosrc ! audioconvert ! audioresample ! \
      $wk $model ! webvttenc ! filesink location="$2"
    ;;
  *)
    echo "$usage" >&2
    exit 2
    ;;
esac
