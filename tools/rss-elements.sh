#!/bin/sh
# Resident memory of N whisperknot elements on one model in one pipeline.
#
#   tools/rss-elements.sh MODEL.knot AUDIO.wav [N] [LATENCY_MS]
#
# Runs N elements (default 10) behind a tee on the same audio and model,
# and prints the process's peak RSS (from /proc/PID/status VmHWM) and,
# sampled while the pipeline runs, the resident part of the model file's
# mappings (how many there are and their Rss from /proc/PID/smaps). Run it
# with N=1 and N=10: the difference is the per-stream state, the model
# mapping stays one. Needs a build tree (BUILD=build by default).
set -eu
model=$1
audio=$2
n=${3:-10}
latency=${4:-1000}
here=$(cd "$(dirname "$0")" && pwd)
: "${GST_PLUGIN_PATH:=$here/../${BUILD:-build}/gst-plugin}"
export GST_PLUGIN_PATH

branches=""
i=0
while [ "$i" -lt "$n" ]; do
  branches="$branches t. ! queue max-size-time=0 max-size-bytes=0 max-size-buffers=0 ! whisperknot model=$model latency=$latency threads=1 ! fakesink sync=false"
  i=$((i + 1))
done

real=$(realpath "$model")
# shellcheck disable=SC2086
gst-launch-1.0 -q filesrc location="$audio" ! wavparse ! audioconvert ! \
  audioresample ! audio/x-raw,rate=16000,channels=1 ! tee name=t $branches &
pid=$!
maps=0
model_rss=0
while kill -0 "$pid" 2>/dev/null; do
  if [ -r "/proc/$pid/smaps" ]; then
    out=$(awk -v f="$real" '
      $0 ~ /^[0-9a-f]+-[0-9a-f]+ / { m = ($NF == f); if (m) n++ }
      m && $1 == "Rss:" { rss += $2 }
      END { printf "%d %d\n", n, rss }' "/proc/$pid/smaps" 2>/dev/null || true)
    set -- $out
    if [ "${2:-0}" -gt "$model_rss" ]; then maps=$1; model_rss=$2; fi
    hwm=$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$pid/status" 2>/dev/null \
      || true)
    [ -n "$hwm" ] && peak=$hwm
  fi
  sleep 0.2
done
wait "$pid" || true
echo "elements=$n peak_rss_kb=${peak:-?} model_mappings=$maps" \
  "model_rss_kb=$model_rss model_file_kb=$(($(stat -c %s "$model") / 1024))"
