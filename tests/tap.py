"""TAP for the Python test scripts: check() prints one test's line (and,
when it fails, the last lines of its detail as comments), done() the plan
and exits 1 if any failed.

    from tap import check, done
    check(rc == 0, "the tool exits 0", output)
    done()
"""
import sys

_n = 0
_failed = 0


def check(cond, what, detail=""):
    """One test: cond true passes; on failure the last 30 lines of detail
    follow as TAP comments."""
    global _n, _failed
    _n += 1
    print("%s %d - %s" % ("ok" if cond else "not ok", _n, what))
    if not cond:
        _failed += 1
        for line in str(detail).splitlines()[-30:]:
            print("# " + line)
    sys.stdout.flush()


def done():
    """The plan (every test run) and the exit status."""
    print("1..%d" % _n)
    sys.exit(1 if _failed else 0)
