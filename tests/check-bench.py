#!/usr/bin/env python3
"""whisperknot-bench runs (a smoke test of the program, not a timing:
benchmarks print, they never judge).

  check-bench.py BENCH DEFAULT_MODEL DATA_DIR

(env: WK_MAKE_TEST_MODEL, WK_CONVERT, for the random test model)

Prints TAP. Checks:
  - every stage once on the default model with jfk.wav (-r 1 --e2e-runs 1
    --past 8 --steps 4): exit 0;
  - --live-streams 1,2 --fast on a random-weight model (small-test dims)
    with the first 3 s of jfk.wav: exit 0 and one table row per stream
    count whose cells parse ("shared / separate" pairs of numbers, kept up
    n/a);
  - bad --live-streams values and --live-streams with --whispercpp: exit 2.
"""
import os
import re
import subprocess
import sys
import tempfile
import wave

from tap import check, done

bench, default_model, data = sys.argv[1:4]
jfk = os.path.join(data, "jfk.wav")


def run(argv, timeout=540):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace")


NUM = r"-?\d+(?:\.\d+)?"
PAIR = r"(%s|-) / (%s|-)" % (NUM, NUM)


def live_rows(out):
    """{N: [cells]} of the table's rows."""
    rows = {}
    for line in out.splitlines():
        m = re.match(r"^\| (\d+) \|(.*)\|$", line)
        if m:
            rows[int(m.group(1))] = [c.strip() for c in m.group(2).split("|")]
    return rows


rc, out = run([bench, "-m", default_model, "-f", jfk, "-t", "1", "-r", "1",
               "--e2e-runs", "1", "--past", "8", "--steps", "4"])
check(rc == 0 and "end-to-end file" in out, "stages and end to end, default model",
      out)

with tempfile.TemporaryDirectory(prefix="wk-bench-",
                                 dir=os.environ.get("WK_BUILD_ROOT")) as tmp:
    small_bin = os.path.join(tmp, "small.bin")
    small = os.path.join(tmp, "small.knot")
    short = os.path.join(tmp, "short.wav")
    for argv in ([os.environ["WK_MAKE_TEST_MODEL"], "--dims", "small-test",
                  "--type", "f32", "--seed", "7", "--vocab",
                  os.path.join(data, "for-tests-ggml-tiny.en.bin"), small_bin],
                 [os.environ["WK_CONVERT"], "--quiet", small_bin, small]):
        rc, out = run(argv)
        if rc != 0:
            print("Bail out! cannot make the test model: %s: %s" % (
                " ".join(argv), out[-500:]))
            sys.exit(1)
    with wave.open(jfk) as r:
        params = r.getparams()
        frames = r.readframes(3 * r.getframerate())
    with wave.open(short, "wb") as w:
        w.setparams(params)
        w.writeframes(frames)

    rc, out = run([bench, "--live-streams", "1,2", "--fast", "-m", small,
                   "-f", short, "-t", "1"])
    check(rc == 0, "--live-streams 1,2 --fast: exit 0", out)
    rows = live_rows(out)
    check(sorted(rows) == [1, 2], "one table row per stream count", out)
    bad = []
    for n, cells in rows.items():
        if len(cells) != 11:
            bad.append("%d: %d cells" % (n, len(cells)))
            continue
        # CPU, ratio, delays x3, kept up, feed lag, final, words, late, RSS
        if not re.fullmatch(r"%s / %s" % (NUM, NUM), cells[0]):
            bad.append("%d: CPU %r" % (n, cells[0]))
        if not re.fullmatch(r"%sx" % NUM, cells[1]):
            bad.append("%d: ratio %r" % (n, cells[1]))
        for c in cells[2:5] + cells[6:9] + cells[10:11]:
            if not re.fullmatch(PAIR, c):
                bad.append("%d: %r" % (n, c))
        if cells[5] != "n/a / n/a":
            bad.append("%d: kept up %r" % (n, cells[5]))
        if not re.fullmatch(r"\d+ / \d+", cells[9]):
            bad.append("%d: late words %r" % (n, cells[9]))
    check(rows and not bad, "the rows' cells parse", "\n".join(bad) + "\n" + out)

for args in (["--live-streams", "0"], ["--live-streams", "1,,x"],
             ["--live-streams", "1", "--whispercpp", "bin", "--ggml", "m.bin"]):
    rc, out = run([bench, "-m", default_model, "-f", jfk] + args)
    if rc != 2:
        break
check(rc == 2, "bad --live-streams, --live-streams with --whispercpp: exit 2",
      "%s: exit %d\n%s" % (" ".join(args), rc, out))
done()
