#!/usr/bin/env bash
# Set-up for a fresh Debian 12 machine (run as root, or with sudo).
#
#   ./bootstrap.sh demo   install, build, transcribe the example audio with
#                         the element and the default model
#   ./bootstrap.sh test   install, check the formatting (tools/gst-indent),
#                         build, run the whole test suite twice:
#                         a normal build, then AddressSanitizer +
#                         UndefinedBehaviorSanitizer; warnings are fatal;
#                         then the fuzz targets for a bounded time
set -euo pipefail
cd "$(dirname "$0")"

what=${1:-demo}
BUILD_DEPS=(
  meson ninja-build pkg-config gcc
  libglib2.0-dev libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev
  gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-good
  liborc-0.4-dev liborc-0.4-dev-bin zlib1g-dev
)
# the WebAssembly engine (web/): clang + wasm-ld + wasi-libc, Node.js, and
# Chromium for the page's test; clang 19 and SIMDe for the relaxed module
# (web/README.md)
TEST_DEPS=(clang libclang-rt-14-dev indent
  lld llvm wasi-libc libclang-rt-14-dev-wasm32 nodejs chromium
  clang-19 lld-19 libclang-rt-19-dev-wasm32 libsimde-dev)

install_deps () {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo=sudo
  local missing=()
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -gt 0 ]; then
    $sudo apt-get update -q
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

case "$what" in
  demo)
    install_deps "${BUILD_DEPS[@]}"
    meson setup build --reconfigure >/dev/null 2>&1 || meson setup build
    ninja -C build
    # held-out sentences read by a synthesized voice (examples/data/make-sample.sh):
    # the kind of speech the default model was trained for
    audio=examples/data/sample.wav
    echo "== whisperknot on $audio (default model) =="
    echo "== expected: $(tr '\n' ' ' < examples/data/sample.txt)"
    GST_PLUGIN_PATH=build/gst-plugin GST_REGISTRY_1_0=build/registry.bin \
      gst-launch-1.0 -q filesrc location="$audio" ! wavparse ! audioconvert ! \
      audioresample ! whisperknot text-lines=true ! fdsink fd=1
    # a real recording (J. F. Kennedy, 1961), a speaker the model never heard
    jfk=${WK_SHARED_DATA:-../shared/data}/jfk.wav
    if [ -f "$jfk" ]; then
      echo "== whisperknot on $jfk (real speech, default model) =="
      echo "== expected: And so, my fellow Americans, ask not what your country can do for you, ask what you can do for your country."
      GST_PLUGIN_PATH=build/gst-plugin GST_REGISTRY_1_0=build/registry.bin \
        gst-launch-1.0 -q filesrc location="$jfk" ! wavparse ! audioconvert ! \
        audioresample ! whisperknot text-lines=true ! fdsink fd=1
    else
      echo "== $jfk not found: set WK_SHARED_DATA to the shared data folder =="
    fi
    ;;
  test)
    install_deps "${BUILD_DEPS[@]}" "${TEST_DEPS[@]}"
    # Debian packages npm apart from nodejs; other Node.js builds bring it
    command -v npm >/dev/null || install_deps npm
    exec bash .ci/test-all.sh
    ;;
  *)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
