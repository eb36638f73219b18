#!/usr/bin/env bash
# The whole test suite: formatting, normal build, sanitizer builds
# (ASan+UBSan, TSan), ORC-less build, fuzz smoke run, the WebAssembly
# engine's build and Node.js tests.
# Prints one summary line "N passed, N failed" at the end.
set -uo pipefail
cd "$(dirname "$0")/.."

passed=0
failed=0
status=0
# What failed, repeated at the end so that the tail of the log names it.
failures=()

count_results () {
  # meson's test log: one JSON object per test (log base name $2, default
  # testlog)
  local log=$1/meson-logs/${2:-testlog}.json
  [ -f "$log" ] || return
  local p f
  # EXPECTEDFAIL: a test meant to fail (should_fail) that did
  p=$(grep -c -E '"result": "(OK|EXPECTEDFAIL)"' "$log" || true)
  f=$(grep -c -E '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
  passed=$((passed + p))
  failed=$((failed + f))
  local name
  while IFS= read -r name; do
    [ -n "$name" ] && failures+=("$1: $name")
  done < <(python3 -c '
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t.get("result") in ("FAIL", "TIMEOUT", "ERROR", "UNEXPECTEDPASS"):
        print(t["name"], t["result"])
        # which test points and checks (tests/wk-test.h) failed, and any
        # sanitizer report: a few lines each, so that the end of a long
        # log still says why
        out = (t.get("stdout") or "") + "\n" + (t.get("stderr") or "")
        hits = [l for l in out.splitlines()
                if l.startswith("not ok") or "SUMMARY:" in l
                or "WARNING: ThreadSanitizer" in l or "Bail out" in l
                or "check failed" in l]
        for l in hits[:8]:
            print("  " + l[:400])
' "$log" 2>/dev/null)
}

run_suite () {
  local dir=$1; shift
  echo "== build $dir ($*) =="
  rm -rf "$dir"
  if ! meson setup "$dir" --werror "$@" || ! ninja -C "$dir"; then
    echo "build $dir failed"
    failures+=("build $dir")
    failed=$((failed + 1))
    status=1
    return
  fi
  if ! meson test -C "$dir" --print-errorlogs --num-processes 2 \
      --timeout-multiplier "${TIMEOUT_MULT:-1}"; then
    status=1
  fi
  count_results "$dir"
}

# Formatting counts as one check: the C sources must be as tools/gst-indent
# leaves them.
echo "== formatting (tools/gst-indent --check) =="
if tools/gst-indent --check; then
  echo "ok formatting"; passed=$((passed + 1))
else
  echo "FAIL formatting: run tools/gst-indent"
  failures+=("formatting")
  failed=$((failed + 1)); status=1
fi

run_suite ci-build
# The suite above runs the widest kernel set this CPU has. The other sets
# users get (AVX2 on most machines, the portable reference elsewhere and
# as the definition) again, on the tests whose results go through the
# kernels end to end: parity with the Python reference (random-weight
# models, f16/q8_0/q4_0, encoder and decoder) and the default model's
# transcription. The kernels test already holds every set to the
# reference. About 2.5 minutes for both lanes (the reference most of it).
for set in avx2 ref; do
  echo "== ci-build with WK_KERNELS=$set (parity, default-model) =="
  if [ -d ci-build ] && ! WK_KERNELS=$set meson test -C ci-build --no-rebuild \
      --print-errorlogs --num-processes 2 --logbase "kernels-$set" \
      parity default-model; then
    status=1
  fi
  [ -d ci-build ] && count_results ci-build "kernels-$set"
done
# The encoder's integer products: the default with AVX-512 VNNI, opt-in
# elsewhere (WK_INT8=all, the AVX2 sets' too); the kernels and parity
# tests with them on everywhere, and parity with them off (WK_INT8=dec,
# the f32 weight panels every CPU without VNNI runs).
echo "== ci-build with WK_INT8=all (kernels, parity) =="
if [ -d ci-build ] && ! WK_INT8=all meson test -C ci-build --no-rebuild \
    --print-errorlogs --num-processes 2 --logbase "int8-all" kernels parity; then
  status=1
fi
[ -d ci-build ] && count_results ci-build "int8-all"
echo "== ci-build with WK_INT8=dec (parity) =="
if [ -d ci-build ] && ! WK_INT8=dec meson test -C ci-build --no-rebuild \
    --print-errorlogs --num-processes 2 --logbase "int8-dec" parity; then
  status=1
fi
[ -d ci-build ] && count_results ci-build "int8-dec"
# WK_POISON_SCRATCH: a stream's scratch (engine/wk-alloc.h, not zeroed)
# starts as 0xff bytes, NaN floats, so code reading it unwritten fails here.
TIMEOUT_MULT=4 run_suite ci-build-asan -Db_sanitize=address,undefined \
  -Db_lundef=false -Dbuildtype=debug -Doptimization=1 \
  -Dc_args=-DWK_POISON_SCRATCH
# The ORC-less build must compile and pass too (checked-in -dist files).
run_suite ci-build-noorc -Dorc=disabled
# ThreadSanitizer (clang): the whole suite, the element and the stress test
# included. GLib's futex locks and queues are annotated for TSan in the
# programs that run GStreamer, and plugins load into the instrumented test
# process instead of the uninstrumented gst-plugin-scanner (tests/tsan/);
# any report fails its test (exit 66).
CC=clang TIMEOUT_MULT=10 run_suite ci-build-tsan -Db_sanitize=thread \
  -Db_lundef=false

# Fuzz targets, each for a bounded time on its seed corpus.
echo "== fuzz =="
if CC=clang meson setup ci-build-fuzz -Dfuzzing=true -Dtests=disabled >/dev/null \
    && ninja -C ci-build-fuzz; then
  for t in ci-build-fuzz/tests/fuzz/fuzz-*; do
    [ -f "$t" ] && [ -x "$t" ] || continue
    name=$(basename "$t")
    corpus=tests/fuzz/corpus/${name#fuzz-}
    mkdir -p "ci-build-fuzz/$name-corpus"
    if "$t" -max_total_time="${FUZZ_SECONDS:-60}" -rss_limit_mb=2048 \
        "ci-build-fuzz/$name-corpus" $( [ -d "$corpus" ] && echo "$corpus" ) \
        > "ci-build-fuzz/$name.log" 2>&1; then
      echo "ok $name"; passed=$((passed + 1))
    else
      echo "FAIL $name"; tail -40 "ci-build-fuzz/$name.log"
      failures+=("fuzz: $name")
      failed=$((failed + 1)); status=1
    fi
  done
else
  echo "fuzz build failed"; failures+=("fuzz build"); failed=$((failed + 1)); status=1
fi

# The WebAssembly engine (web/README.md): the cross build with warnings
# fatal, then Node's test runner over web/tests, which compares its tokens
# with ci-build's native tools; each Node test counts.
echo "== wasm (web/build.sh; node --test web/tests) =="
rm -rf ci-build-wasm
if WK_WASM_BUILD=ci-build-wasm WK_WASM_MESON_ARGS=--werror web/build.sh; then
  node_flags=()
  # node:wasi needs this flag before Node.js 20 (Debian 12 has 18)
  [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 20 ] && \
    node_flags+=(--experimental-wasi-unstable-preview1)
  # relaxed SIMD (whisperknot-relaxed.wasm) is on by default from Node.js
  # 22; the tests in this process then run the relaxed module, and
  # web/transcribe.mjs, which they start without the flag, the SIMD128 one
  [ "$(node -p 'process.versions.node.split(".")[0]')" -lt 22 ] && \
    node_flags+=(--experimental-wasm-relaxed-simd)
  WK_WASM_BUILD=ci-build-wasm WK_NATIVE_BUILD=${WK_NATIVE_BUILD:-ci-build} \
    node "${node_flags[@]}" --test web/tests/ > ci-build-wasm/node-test.log 2>&1
  node_rc=$?
  grep -E '^(not )?ok |^# (pass|fail|skipped) ' ci-build-wasm/node-test.log
  p=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' ci-build-wasm/node-test.log | tail -1)
  f=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' ci-build-wasm/node-test.log | tail -1)
  passed=$((passed + ${p:-0}))
  failed=$((failed + ${f:-0}))
  if [ "$node_rc" != 0 ] || [ -z "$p" ]; then
    grep -B2 -A30 '^not ok' ci-build-wasm/node-test.log | head -150
    while IFS= read -r name; do failures+=("wasm: $name"); done \
      < <(grep -E '^not ok ' ci-build-wasm/node-test.log | grep -v '# TODO')
    [ "$node_rc" != 0 ] && failures+=("wasm: node exited $node_rc")
    [ -n "$f" ] && [ "$f" != 0 ] || failed=$((failed + 1))
    status=1
  fi
else
  echo "wasm build failed"; failures+=("wasm build"); failed=$((failed + 1)); status=1
fi

echo
for f in "${failures[@]}"; do echo "FAILED: $f"; done
echo "$passed passed, $failed failed"
exit $status
