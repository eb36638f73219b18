#!/usr/bin/env python3
"""Does the working tree still fit what a lent GPU machine can carry?

  tools/check-tree-size.py [-C DIR] [--budget-mib B | --reserve-mib R] [--top N]
                           [--tracked-only] [CARRY ...]

A lent GPU machine receives the working tree (tracked files, untracked files git
does not ignore, a shared/ folder inside the checkout) plus the ignored paths a
call carries, 64 MiB in all (see the developers' guide). knots/train/README.md's
GPU recipe carries, beside the tree (sizes of 2026-12-01):

  tts.tar.xz     espeak-ng + flite with their data (tts-bundle.sh)  16.05 MiB
  text.tar.xz    the sentence pools (knots/work/text/*.txt)          1.65 MiB
  shared.tar.xz  gpt2.tiktoken, mel_filters.npz                      0.26 MiB
  speech.tar     real training speech, Opus 12 kbit/s (speechpack.py) 11.29 MiB
                 (LJ Speech 1.60 h, FSDD 0.26 h, asterisk 0.29 h)
                                                             total  29.25 MiB

so the tree itself gets 64 - RESERVE with RESERVE = 30 MiB: a budget of 34 MiB
(the tree was 29.4 MiB then: the q8_0 default knot 22.6 MiB, the rest 6.8 MiB).
Without CARRY arguments the tree is held to that budget. With CARRY paths
(files or folders, e.g. .devcarry) they are added and the whole is held to the
full 64 MiB, no reserve: run that before a GPU call with what it will carry.

Prints the total, the arithmetic and the largest files; exits 1 when over
budget, 0 when within, 77 (skipped) outside a git checkout or without git.
"""
import argparse
import os
import subprocess
import sys

MIB = 1 << 20
TOTAL_MIB = 64      # what travels to a lent GPU machine, tree + carried paths
RESERVE_MIB = 30    # the GPU recipe's carried bundles (above), rounded up
SKIP = 77


def git_files(root, *extra):
    r = subprocess.run(["git", "-C", root, "ls-files", "-z"] + list(extra),
                       capture_output=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.decode(errors="replace").strip())
    return [p for p in r.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def size_of(path):
    """Bytes of a file (a link counts as itself), or of everything under a folder."""
    try:
        st = os.lstat(path)
    except OSError:
        return 0  # tracked but deleted in the working tree: does not travel
    if not os.path.isdir(path) or os.path.islink(path):
        return st.st_size
    total = 0
    for d, _, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(d, f)).st_size
            except OSError:
                pass
    return total


def walk_files(path):
    if os.path.isdir(path) and not os.path.islink(path):
        for d, _, files in os.walk(path):
            for f in files:
                yield os.path.join(d, f)
    else:
        yield path


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-C", dest="root", default=None, help="the checkout (default: this script's)")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--budget-mib", type=float, default=None,
                   help="limit for the total (default: %d - %d without CARRY, %d with)"
                   % (TOTAL_MIB, RESERVE_MIB, TOTAL_MIB))
    g.add_argument("--reserve-mib", type=float, default=None,
                   help="room kept for carried paths not named (default %d without CARRY, 0 "
                   "with)" % RESERVE_MIB)
    ap.add_argument("--top", type=int, default=10, help="largest files to list")
    ap.add_argument("--tracked-only", action="store_true",
                    help="leave out untracked files git does not ignore (they travel too)")
    ap.add_argument("carry", nargs="*", help="ignored paths a GPU call carries")
    args = ap.parse_args()

    root = args.root or os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        r = subprocess.run(["git", "-C", root, "rev-parse", "--show-toplevel"],
                           capture_output=True, text=True)
    except OSError:
        print("check-tree-size: no git here: skipped")
        return SKIP
    if r.returncode != 0:
        print("check-tree-size: %s is not a git checkout: skipped" % root)
        return SKIP
    if os.path.realpath(r.stdout.strip()) != os.path.realpath(root):
        # e.g. a release tarball unpacked inside some other repository
        print("check-tree-size: %s is not the top of a git checkout (%s is): skipped"
              % (root, r.stdout.strip()))
        return SKIP
    root = os.path.realpath(root)

    groups = {}  # label -> [(bytes, path)]
    groups["tracked"] = [(size_of(os.path.join(root, p)), p) for p in git_files(root)]
    if not args.tracked_only:
        groups["untracked, not ignored"] = [
            (size_of(os.path.join(root, p)), p)
            for p in git_files(root, "--others", "--exclude-standard")]
        shared = os.path.join(root, "shared")
        if os.path.isdir(shared):
            seen = {p for _, p in groups["tracked"] + groups["untracked, not ignored"]}
            groups["shared/ (travels whole)"] = [
                (size_of(f), os.path.relpath(f, root)) for f in walk_files(shared)
                if os.path.relpath(f, root) not in seen]
    carried = []
    for c in args.carry:
        p = c if os.path.isabs(c) else os.path.join(root, c)
        if not os.path.exists(p):
            print("check-tree-size: carry path %s does not exist" % c)
            return 1
        inside = os.path.abspath(p).startswith(root + os.sep)
        carried += [(size_of(f), os.path.relpath(f, root) if inside else os.path.abspath(f))
                    for f in walk_files(p)]
    if args.carry:
        groups["carried"] = carried

    if args.budget_mib is not None:
        budget = args.budget_mib
        how = "--budget-mib"
    else:
        reserve = args.reserve_mib if args.reserve_mib is not None else \
            (0 if args.carry else RESERVE_MIB)
        budget = TOTAL_MIB - reserve
        how = "%d MiB - %g MiB reserved for the GPU recipe's carried bundles" % (
            TOTAL_MIB, reserve) if reserve else "%d MiB, all of it" % TOTAL_MIB
    total = 0
    print("what travels to a lent GPU machine, from %s:" % root)
    for label, items in groups.items():
        b = sum(s for s, _ in items)
        total += b
        print("  %-26s %5d files %10d bytes %7.2f MiB" % (label, len(items), b, b / MIB))
    print("  %-26s %5s       %10d bytes %7.2f MiB" % ("total", "", total, total / MIB))
    print("budget: %.2f MiB (%s)" % (budget, how))
    everything = sorted((x for items in groups.values() for x in items), reverse=True)
    print("largest files:")
    for s, p in everything[:args.top]:
        print("  %10d  %7.2f MiB  %s" % (s, s / MIB, p))
    if total > budget * MIB:
        print("FAIL: %.2f MiB is over the budget of %.2f MiB by %.2f MiB: a GPU call with "
              "knots/train/README.md's recipe would not start (see that README for what the "
              "recipe carries, and this script's header for the arithmetic)"
              % (total / MIB, budget, total / MIB - budget))
        return 1
    print("ok: %.2f MiB left under the budget" % (budget - total / MIB))
    return 0


if __name__ == "__main__":
    sys.exit(main())
