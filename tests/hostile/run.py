#!/usr/bin/env python3
"""Runs the hostile-input cases of gen.py through the build's programs and
prints TAP, one test point per case.

Each case runs under a timeout and passes when the program gave what the
case expects: a clear error (non-zero exit, no signal, a message matching
the case's pattern, and no partial output file) or well-defined output
(exit 0, and text where text is expected). A signal, a timeout, a
sanitizer report or exit 0 with no text where text was expected fails.
Cases marked xfail (a fix not landed yet) are TAP TODO points, so that
they report as expected failures and as unexpected passes once fixed.

The programs come from the meson test environment (WK_TRANSCRIBE,
WK_CONVERT, WK_MAKE_TEST_MODEL, WK_SHARED_DATA); the element runs in
wk-hostile-gst with only the plugins it needs, scanned in-process.
"""

import argparse
import concurrent.futures
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen  # noqa: E402

# the small random-weight base model: one layer each side, d = 32
SMALL_DIMS = "51864,1500,32,1,1,64,32,1,1,80"
# system plugins the element cases use
SYSTEM_PLUGINS = ("coreelements", "app", "audiotestsrc", "wavparse",
                  "audioconvert", "audioresample", "rawparse")
SANITIZER = re.compile(r"ERROR: AddressSanitizer|ERROR: LeakSanitizer|"
                       r"runtime error:|WARNING: ThreadSanitizer|"
                       r"ERROR: ThreadSanitizer")


def die(msg):
    print("Bail out! " + msg)
    sys.exit(1)


def make_bases(work, shared):
    small_bin = os.path.join(work, "small.bin")
    small_knot = os.path.join(work, "small.knot")
    for argv in ([os.environ["WK_MAKE_TEST_MODEL"], "--dims", SMALL_DIMS,
                  "--type", "f32", "--seed", "1", "--vocab",
                  os.path.join(shared, "for-tests-ggml-tiny.en.bin"),
                  small_bin],
                 [os.environ["WK_CONVERT"], "--quiet", "--type", "q8_0",
                  "--vocab", os.path.join(shared, "gpt2.tiktoken"),
                  small_bin, small_knot]):
        r = subprocess.run(argv, stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, timeout=600)
        if r.returncode != 0:
            die("cannot make the base model: %s: %s" % (
                " ".join(argv), r.stdout.decode(errors="replace")[-500:]))
    return small_knot, small_bin


def gst_env(work, plugin_dir, system_dir):
    """Our plugin and a few system ones, scanned in this process (the
    external scanner cannot load a sanitizer build's plugin)."""
    subset = os.path.join(work, "gst-plugins")
    os.mkdir(subset)
    missing = []
    for p in SYSTEM_PLUGINS:
        so = os.path.join(system_dir, "libgst%s.so" % p)
        if os.path.exists(so):
            os.symlink(so, os.path.join(subset, os.path.basename(so)))
        else:
            missing.append(p)
    env = dict(os.environ)
    env.update(GST_PLUGIN_PATH_1_0=plugin_dir,
               GST_PLUGIN_SYSTEM_PATH_1_0=subset,
               GST_REGISTRY_1_0=os.path.join(work, "registry.bin"),
               GST_REGISTRY_FORK="no")
    return env, missing


class Runner:
    def __init__(self, progs, env, gst_env_, timeout, scale, trained, work):
        self.progs = progs
        self.env = env
        self.gst_env = gst_env_
        self.timeout = timeout
        self.scale = scale
        self.trained = trained
        self.work = work

    def run(self, idx, case):
        d = os.path.join(self.work, "case-%04d" % idx)
        os.mkdir(d)
        t0 = time.monotonic()
        try:
            argv = case.make(d)
        except Exception as e:      # a generator bug, not a program's
            return False, "cannot make the case: %r" % e, 0.0, ""
        timeout = (case.timeout or self.timeout) * self.scale
        rc, hung, text, msg = self.execute(argv, d, case, timeout)
        ok, why = self.judge(case, rc, hung, timeout, text, msg, d)
        if ok and rc == 0 and case.check:
            # what the program wrote must work: run the follow-up on it
            rc2, hung2, _, msg2 = self.execute(case.check(d), d, None,
                                               timeout)
            ok, why = self.judge_check(rc2, hung2, timeout, msg2)
            msg += msg2
        dt = time.monotonic() - t0
        tail = msg.strip()[-600:]
        shutil.rmtree(d, ignore_errors=True)
        return ok, why, dt, tail

    def execute(self, argv, d, case, timeout):
        prog = argv[0]
        argv = [self.progs[prog]] + argv[1:]
        env = self.gst_env if prog == "gst" else self.env
        if case and case.env:
            env = dict(env)
            env.update((k, v.replace("{dir}", d)) for k, v in
                       case.env.items())
        case_stdin = case.stdin if case else None
        out_path, err_path = os.path.join(d, "stdout"), os.path.join(
            d, "stderr")
        stdin = open(os.path.join(d, case_stdin), "rb") if case_stdin \
            else subprocess.DEVNULL
        with open(out_path, "wb") as out, open(err_path, "wb") as err:
            p = subprocess.Popen(argv, stdin=stdin, stdout=out, stderr=err,
                                 env=env, cwd=d, start_new_session=True)
            if case and case.during:
                case.during(p, d)
            try:
                p.wait(timeout=timeout)
                hung = False
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                hung = True
        if case_stdin:
            stdin.close()
        text = open(out_path, "rb").read().decode(errors="replace")
        msg = open(err_path, "rb").read().decode(errors="replace")
        return p.returncode, hung, text, msg

    def judge_check(self, rc, hung, timeout, msg):
        if hung or rc < 0 or SANITIZER.search(msg):
            return False, "its output then hangs or crashes the transcriber"
        if rc != 0:
            first = (msg.strip().splitlines() or [""])[0]
            return False, "exit 0, but its output does not load: " + first[
                :160]
        return True, "output loads and runs"

    def judge(self, case, rc, hung, timeout, text, msg, d):
        if hung:
            return False, "hang: no exit within %g s" % timeout
        if rc < 0:
            return False, "crash: signal %s" % signal.Signals(-rc).name
        if SANITIZER.search(msg):
            return False, "sanitizer report"
        expect = case.expect
        if not self.trained:
            expect = {"text": "ok", "error-or-text": "error-or-ok"}.get(
                expect, expect)
        if rc != 0:
            if not expect.startswith("error"):
                return False, "error (exit %d) where output was expected" % rc
            first = msg.strip().splitlines()
            if not first:
                return False, "exit %d with no message" % rc
            if case.want and not re.search(case.want, msg, re.I):
                return False, "message does not name the problem (/%s/)" % (
                    case.want)
            if case.no_output and os.path.exists(os.path.join(
                    d, case.no_output)):
                return False, "left a partial %s after the error" % (
                    case.no_output)
            return True, "error: " + first[0][:160]
        if expect == "error":
            return False, "exit 0 where an error was expected"
        if expect.endswith("text") and not text.strip():
            return False, "silent: exit 0 and no text"
        return True, "output: %d bytes" % len(text)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--harness", help="wk-hostile-gst (none: no element "
                    "cases)")
    ap.add_argument("--plugin-dir")
    ap.add_argument("--system-plugin-dir")
    ap.add_argument("--default-model", required=True)
    ap.add_argument("--trained", type=int, default=1,
                    help="0: the default model is a random stand-in, so "
                    "cases that expect text accept none")
    ap.add_argument("--timeout", type=float, default=60.0,
                    help="seconds per case, unless the case says")
    ap.add_argument("--timeout-scale", type=float, default=1.0,
                    help="times every timeout (sanitizer builds)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--sanitizer", default="none",
                    help="the build's b_sanitize (for xfail_under)")
    ap.add_argument("--only", help="regex: run the cases whose name matches")
    ap.add_argument("--keep", action="store_true",
                    help="keep the work folder")
    a = ap.parse_args()

    shared = os.environ.get("WK_SHARED_DATA")
    if not shared:
        die("WK_SHARED_DATA is not set (run through meson test)")
    t_start = time.monotonic()
    work = tempfile.mkdtemp(prefix="wk-hostile-")
    small_knot, small_bin = make_bases(work, shared)
    progs = {"transcribe": os.environ["WK_TRANSCRIBE"],
             "convert": os.environ["WK_CONVERT"], "gst": a.harness}
    env = dict(os.environ)
    genv, missing = (None, [])
    if a.harness:
        genv, missing = gst_env(work, a.plugin_dir, a.system_plugin_dir)
    # meson passes it relative to the build folder; cases run elsewhere
    a.default_model = os.path.abspath(a.default_model)
    ctx = gen.Ctx(small_knot, small_bin, a.default_model,
                  os.path.join(shared, "jfk.wav"),
                  gst_ok=bool(a.harness) and not missing)
    cases = gen.all_cases(ctx)
    if a.only:
        cases = [c for c in cases if re.search(a.only, c.name)]
    runner = Runner(progs, env, genv, a.timeout, a.timeout_scale,
                    bool(a.trained), work)
    if ctx.gst_ok:
        # build the registry once, before cases scan it in parallel
        subprocess.run([a.harness, "launch", "fakesrc num-buffers=1 ! "
                        "fakesink"], env=genv,
                       timeout=a.timeout * a.timeout_scale,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    print("1..%d" % len(cases))
    if missing:
        print("# element cases skipped: no system plugin %s" %
              ", ".join(missing))
    n_fail = 0
    per_class = {}
    slow = []
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        futs = [pool.submit(runner.run, i, c) for i, c in enumerate(cases)]
        for i, (c, f) in enumerate(zip(cases, futs), 1):
            ok, why, dt, tail = f.result()
            st = per_class.setdefault(c.cls, [0, 0, 0.0])
            st[0] += 1
            st[2] += dt
            slow.append((dt, c.name))
            xfail = c.xfail or c.xfail_under.get(a.sanitizer)
            todo = " # TODO %s" % xfail if xfail and not (ok and c.racy) \
                else ""
            print("%s %d - %s: %s%s" % ("ok" if ok else "not ok", i, c.name,
                                        why, todo))
            if not ok:
                st[1] += 1
                if not xfail:
                    n_fail += 1
                for line in tail.splitlines()[-8:]:
                    print("#   " + line)
            sys.stdout.flush()
    for cls, (n, nf, t) in per_class.items():
        print("# %-12s %4d cases, %d failed, %.1f s of program time" % (
            cls, n, nf, t))
    slow.sort(reverse=True)
    print("# slowest: " + ", ".join("%s %.1f s" % (n, t) for t, n in
                                    slow[:3]))
    print("# %d cases in %.1f s" % (len(cases), time.monotonic() - t_start))
    if a.keep:
        print("# work folder kept: " + work)
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if n_fail else 0


if __name__ == "__main__":
    sys.exit(main())
