#!/bin/sh
# Live captions for an RTP audio stream: L16 (16 kHz mono, payload 96) or
# Opus (48 kHz RTP clock, payload 97), chosen with CODEC=l16 (default) or
# CODEC=opus on both sides.
#
#   examples/rtp.sh receive [PORT] [MODEL.knot]   print the captions
#   examples/rtp.sh send FILE [HOST] [PORT]       stream a file in real time
#
# Try both on one machine: "rtp.sh receive" in one terminal, "rtp.sh send
# speech.wav" in another (CODEC=opus in front of both for Opus). The
# jitter buffer marks lost packets, and the element transcribes short
# losses as silence. LATENCY (ms, default 1000) is whisperknot's.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
: "${GST_PLUGIN_PATH:=$here/../${BUILD:-build}/gst-plugin}"
export GST_PLUGIN_PATH

case "${CODEC:-l16}" in
  l16|L16)
    caps="application/x-rtp,media=audio,clock-rate=16000,encoding-name=L16,\
encoding-params=1,channels=1,payload=96"
    depay="rtpL16depay"
    pay="audio/x-raw,rate=16000,channels=1 ! rtpL16pay pt=96"
    ;;
  opus|OPUS)
    caps="application/x-rtp,media=audio,clock-rate=48000,encoding-name=OPUS,\
payload=97"
    depay="rtpopusdepay ! opusdec"
    pay="opusenc ! rtpopuspay pt=97"
    ;;
  *)
    echo "$0: CODEC must be l16 or opus" >&2
    exit 2
    ;;
esac

case "${1:-}" in
  receive)
    port=${2:-5004}
    model=${3:+model=$3}
    if gst-inspect-1.0 srtenc >/dev/null 2>&1; then
      out="srtenc ! fdsink fd=1 sync=false"
      lines=""
    else
      # plain text: words one space apart, a line per segment or utterance
      out="fdsink fd=1 sync=false"
      lines=text-lines=true
    fi
    # shellcheck disable=SC2086
    exec gst-launch-1.0 -q udpsrc port="$port" caps="$caps" ! \
      rtpjitterbuffer latency=100 ! $depay ! audioconvert ! \
      audioresample ! whisperknot latency="${LATENCY:-1000}" $model $lines ! $out
    ;;
  send)
    [ $# -ge 2 ] || { echo "usage: $0 send FILE [HOST] [PORT]" >&2; exit 2; }
    # shellcheck disable=SC2086
    exec gst-launch-1.0 -q filesrc location="$2" ! decodebin ! \
      audioconvert ! audioresample ! $pay ! \
      udpsink host="${3:-127.0.0.1}" port="${4:-5004}"
    ;;
  *)
    echo "usage: $0 receive [PORT] [MODEL.knot] | send FILE [HOST] [PORT]" >&2
    exit 2
    ;;
esac
