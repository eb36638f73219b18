#!/bin/sh
# Start training in the background with the settings we use on the 2-core dev machine.
# Usage: knots/train/run-train.sh [threads] [extra train.py args...]
cd "$(dirname "$0")/../.." || exit 1
T=${1:-1}; [ $# -gt 0 ] && shift
mkdir -p knots/work/logs
export OMP_NUM_THREADS=$T OMP_WAIT_POLICY=PASSIVE
[ -e /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 ] && export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4
nohup /usr/bin/python3 knots/train/train.py --threads "$T" "$@" >> knots/work/logs/train.out 2>&1 &
echo $! > knots/work/logs/train.pid
echo "training started, pid $(cat knots/work/logs/train.pid), log knots/train/log.txt"
