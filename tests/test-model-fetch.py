#!/usr/bin/env python3
"""whisperknot-model against a local HTTP server on 127.0.0.1 (TAP).

The server serves a generated random-weight ggml model; a checksum table made here
names it. Cases: a good download installs a knot that the transcriber loads by name;
a download cut short, a wrong checksum, a missing file (HTTP 404), an unreachable
server and a disk that fills up (a write that fails as on a full disk: the file size
limit RLIMIT_FSIZE makes write(2) fail with EFBIG, as ENOSPC does on a full one)
and a failed conversion each fail with a clear message and leave nothing in the model folder.

  test-model-fetch.py TOOL MODELS_TSV   (env: WK_CONVERT, WK_MAKE_TEST_MODEL,
                                         WK_TRANSCRIBE, WK_SHARED_DATA)
"""
import hashlib
import http.server
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import threading

from tap import check, done

tool = sys.argv[1]


tmp = tempfile.mkdtemp(prefix="wk-fetch-")
served = os.path.join(tmp, "www")
os.makedirs(served)
shared = os.environ["WK_SHARED_DATA"]
model = os.path.join(served, "ggml-test.bin")
subprocess.run([os.environ["WK_MAKE_TEST_MODEL"], "--vocab",
                os.path.join(shared, "for-tests-ggml-tiny.en.bin"), model], check=True,
               capture_output=True)
data = open(model, "rb").read()
sha = hashlib.sha1(data).hexdigest()
for alias in ("short", "badsum", "full"):
    os.link(model, os.path.join(served, "ggml-%s.bin" % alias))
table = os.path.join(tmp, "models.tsv")
with open(table, "w") as f:
    f.write("# test table\n")
    for name, s in (("test", sha), ("short", sha), ("badsum", "0" * 40), ("full", sha),
                    ("absent", sha)):
        f.write("%s\t%d KiB\t%s\n" % (name, len(data) >> 10, s))


class Handler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **k):
        super().__init__(*a, directory=served, **k)

    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path.endswith("/ggml-short.bin"):
            # promise the whole file, send a third of it, hang up
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[:len(data) // 3])
            self.wfile.flush()
            self.close_connection = True
            return
        super().do_GET()


class Server(http.server.ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # the client hanging up on a cut-short or over-limit download is the test


srv = Server(("127.0.0.1", 0), Handler)
threading.Thread(target=srv.serve_forever, daemon=True).start()
port = srv.server_address[1]
mdir = os.path.join(tmp, "data", "whisperknot")
env = dict(os.environ, XDG_DATA_HOME=os.path.join(tmp, "data"),
           WHISPERKNOT_MODEL_URL="http://127.0.0.1:%d/models" % port,
           WHISPERKNOT_MODEL_TABLE=table, WHISPERKNOT_CONVERT=os.environ["WK_CONVERT"])
env.pop("WHISPERKNOT_MODEL_DIR", None)


def run(args, env_=None, limit=None):
    def pre():
        if limit:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return subprocess.run([sys.executable, tool] + args, env=env_ or env, capture_output=True,
                          text=True, timeout=120, preexec_fn=pre)


def leftovers():
    return sorted(f for f in os.listdir(mdir) if f != "test.knot") if os.path.isdir(mdir) else []


# served under /models/: the handler maps the URL path onto the folder
os.makedirs(os.path.join(served, "models"))
for f in os.listdir(served):
    if f.endswith(".bin"):
        os.link(os.path.join(served, f), os.path.join(served, "models", f))

r = run(["get", "test", "--type", "q8_0"])
knot = os.path.join(mdir, "test.knot")
check(r.returncode == 0 and os.path.exists(knot), "get installs test.knot", r.stderr + r.stdout)
r2 = run(["path", "test"])
check(r2.returncode == 0 and r2.stdout.strip() == knot, "path prints the installed knot", r2.stderr)
t = subprocess.run([os.environ["WK_TRANSCRIBE"], "-m", knot, "-b", "1", "-t", "1",
                    os.path.join(shared, "jfk.wav")], capture_output=True, text=True, timeout=300)
check(t.returncode == 0, "the installed knot loads and runs", t.stderr)
t = subprocess.run([os.environ["WK_TRANSCRIBE"], "-m", "test", "-b", "1", "-t", "1",
                    os.path.join(shared, "jfk.wav")], capture_output=True, text=True, timeout=300,
                   env=env)
check(t.returncode == 0, "whisperknot-transcribe -m test finds it by name", t.stderr)
r = run(["list"])
check(r.returncode == 0 and knot in r.stdout, "list shows it installed", r.stdout + r.stderr)

r = run(["get", "short"])
check(r.returncode != 0 and "stopped after" in r.stderr and not leftovers(),
      "a download cut short fails and leaves nothing", r.stderr + repr(leftovers()))
r = run(["get", "badsum"])
check(r.returncode != 0 and "checksum mismatch" in r.stderr and not leftovers(),
      "a wrong checksum fails and leaves nothing", r.stderr + repr(leftovers()))
r = run(["get", "absent"])
check(r.returncode != 0 and "HTTP 404" in r.stderr and not leftovers(),
      "a missing file (404) fails and leaves nothing", r.stderr + repr(leftovers()))
r = run(["get", "full"], limit=len(data) // 2)
check(r.returncode != 0 and "failed" in r.stderr and not leftovers(),
      "a disk that fills up during the download fails and leaves nothing",
      r.stderr + repr(leftovers()))
before = open(knot, "rb").read()
r = run(["get", "test", "--force"], env_=dict(env, WHISPERKNOT_CONVERT="/bin/false"))
check(r.returncode != 0 and "converting" in r.stderr and not leftovers() and
      open(knot, "rb").read() == before,
      "a failed conversion leaves nothing and keeps the installed knot as it was",
      r.stderr + repr(leftovers()))
srv.shutdown()
srv.server_close()
r = run(["get", "full"])
check(r.returncode != 0 and "failed" in r.stderr and not leftovers(),
      "an unreachable server fails and leaves nothing", r.stderr + repr(leftovers()))
r = run(["get", "nonesuch"])
check(r.returncode != 0 and "unknown model" in r.stderr, "an unknown name is refused", r.stderr)
shutil.rmtree(tmp, ignore_errors=True)
done()
