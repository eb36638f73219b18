#!/usr/bin/env python3
"""wk-live-latency's virtual time (a smoke test of the program; it measures
nothing and times nothing).

  check-live-latency.py WK_LIVE_LATENCY DEFAULT_MODEL DATA_DIR

Prints TAP. Checks, on the default model with jfk.wav:
  - --virtual: exit 0, "virtual time" in the summary, words committed, and
    the same output twice (the words, their times, the delays and error
    rates: a run takes what the cost model says, so none of them depends
    on the machine);
  - --virtual with --sweep --latencies 1000: both policies' rows;
  - real time: the run cost fit line, four costs that are not negative
    (the form --virtual takes);
  - bad --virtual values, --virtual with --streams 2 or --fast: exit 2.
"""
import re
import subprocess
import sys

from tap import check, done

tool, model, data = sys.argv[1:4]
jfk = data + "/jfk.wav"


def run(args, timeout=300):
    r = subprocess.run([tool, "-m", model, "-t", "1"] + args,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       timeout=timeout)
    return r.returncode, r.stdout.decode(errors="replace")


COSTS = "2.4,0.12,0.39,0"
rc1, out1 = run(["-l", "1000", "--virtual", COSTS, jfk])
words = re.search(r"^words: (\d+) live", out1, re.M)
check(rc1 == 0 and "virtual time" in out1 and words and int(words.group(1)) > 5,
      "--virtual transcribes jfk.wav live", out1)
rc2, out2 = run(["-l", "1000", "--virtual", COSTS, jfk])


def timed(out):
    # the "# offline" and "# live" lines hold CPU and stage times measured
    # on the machine: not compared
    return [l for l in out.splitlines()
            if not l.startswith("# offline") and not l.startswith("# live")]


same = timed(out1) == timed(out2)
check(rc2 == 0 and same, "--virtual gives the same words and figures twice",
      "\n".join(l for l in out1.splitlines()[:20]) + "\n---\n" +
      "\n".join(l for l in out2.splitlines()[:20]))

rc, out = run(["--sweep", "--latencies", "1000", "--virtual", COSTS, jfk])
rows = re.findall(r"^\| 1000 \| (agreement|deadline) \|", out, re.M)
check(rc == 0 and rows == ["agreement", "deadline"],
      "--virtual --sweep: a row per policy", out)

rc, out = run(["-q", "-l", "1000", jfk])
fit = re.search(r"^run cost fit over (\d+) runs .*--virtual "
                r"([-0-9.e+]+),([-0-9.e+]+),([-0-9.e+]+),([-0-9.e+]+)$",
                out, re.M)
check(rc == 0 and fit and all(float(fit.group(i)) >= 0 for i in range(2, 6)),
      "real time: the runs' cost fit, in --virtual's form", out)
if fit:
    rc, out = run(["-q", "-l", "1000", "--virtual",
                   ",".join(fit.group(i) for i in range(2, 6)), jfk])
    check(rc == 0, "the fitted costs are taken by --virtual", out)

for bad, what in ((["--virtual", "1,2", jfk], "three costs missing"),
                  (["--virtual", "1,2,3,-4", jfk], "a negative cost"),
                  (["--virtual", COSTS, "--streams", "2", jfk], "two streams"),
                  (["--virtual", COSTS, "--fast", jfk], "with --fast")):
    rc, out = run(bad)
    check(rc == 2, "--virtual refused: " + what, out)

done()
