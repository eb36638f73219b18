#!/bin/sh
# The installed library as a program outside the tree sees it: installs the
# build into a temporary DESTDIR, builds examples/embed.c there with
# `pkg-config --cflags --libs whisperknot` and runs it on the installed
# model. Prints TAP.
#
#   test-install.sh CC [CFLAGS...]
#
# The compiler command comes as arguments (with -fsanitize=... in sanitizer
# builds, so the program loads an instrumented library); tests/meson.build
# sets the rest in the environment:
#   WK_MESON, WK_BUILD_ROOT, WK_SOURCE_ROOT      meson, the build, the source
#   WK_VERSION                                   the project's version
#   WK_LIBDIR, WK_INCLUDEDIR, WK_PLUGINDIR       install paths (absolute,
#   WK_MODEL, WK_VAD_MODEL                       without the DESTDIR)
#   WK_EMBED_REF                                 wk-embed-example of the build
#   WK_WAV, WK_EXPECT                            audio; words its text must
#                                                hold (empty: random model)
set -u

n=0
failures=0
ok () {
  n=$((n + 1)); echo "ok $n - $1"
}
not_ok () {
  n=$((n + 1)); failures=$((failures + 1)); echo "not ok $n - $1"
}
skip () {
  n=$((n + 1)); echo "ok $n - $1 # SKIP $2"
}
# Runs a command, showing its output as TAP comments.
quiet () {
  "$@" > "$d/cmd.log" 2>&1
  rc=$?
  [ $rc -eq 0 ] || sed 's/^/# /' "$d/cmd.log"
  return $rc
}

echo "1..9"

d=$(mktemp -d "${TMPDIR:-/tmp}/wk-test-install-XXXXXX") || exit 1
trap 'rm -rf "$d"' EXIT
dest=$d/root
lib=$dest$WK_LIBDIR/libwhisperknot.so
header=$dest$WK_INCLUDEDIR/whisperknot/whisperknot.h

# 1: the install itself
if quiet "$WK_MESON" install -C "$WK_BUILD_ROOT" --no-rebuild --quiet \
    --destdir "$dest"; then
  ok "meson install --destdir"
else
  not_ok "meson install --destdir"
fi

# 2: the development files where a user looks for them, and the soname
soname=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ -f "$header" ] && [ -f "$dest$WK_LIBDIR/pkgconfig/whisperknot.pc" ] \
    && [ "$soname" = libwhisperknot.so.0 ] \
    && [ -f "$dest$WK_LIBDIR/$soname" ]; then
  ok "header, whisperknot.pc and $soname installed"
else
  not_ok "header, whisperknot.pc and libwhisperknot.so.0 installed (soname '$soname')"
fi

# 3: pkg-config finds the installed copy (and not a system one)
PKG_CONFIG_PATH=$dest$WK_LIBDIR/pkgconfig
PKG_CONFIG_SYSROOT_DIR=$dest
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
version=$(pkg-config --modversion whisperknot 2>&1)
flags=$(pkg-config --cflags --libs whisperknot 2>&1)
case "$flags" in
  -I"$dest$WK_INCLUDEDIR"/whisperknot*-L"$dest$WK_LIBDIR"\ *-lwhisperknot*)
    if [ "$version" = "$WK_VERSION" ]; then
      ok "pkg-config: whisperknot $version in the DESTDIR"
    else
      not_ok "pkg-config: version '$version', want $WK_VERSION"
    fi ;;
  *) not_ok "pkg-config --cflags --libs whisperknot: $flags" ;;
esac

# 4: the library exports exactly the WK_API functions of the header: no
# internal wk_* function and nothing from the static dependencies
nm -D --defined-only "$lib" 2>/dev/null | awk '$2 != "A" { print $3 }' \
  | sed 's/@.*//' | sort > "$d/exported"
tr '\n' ' ' < "$header" | grep -o 'WK_API[^(;]*(' \
  | sed -n 's/.*[^a-z0-9_]\(wk_[a-z0-9_]*\) *($/\1/p' | sort > "$d/declared"
if [ -s "$d/declared" ] && cmp -s "$d/exported" "$d/declared"; then
  ok "exports are the header's $(wc -l < "$d/declared") WK_API functions"
else
  not_ok "exports differ from the header's WK_API functions"
  diff "$d/declared" "$d/exported" | sed 's/^/# /'
fi

# 5: the plugin uses the shared library rather than a copy of the engine
plugin=$dest$WK_PLUGINDIR/libgstwhisperknot.so
if readelf -d "$plugin" 2>/dev/null | grep -q 'NEEDED.*\[libwhisperknot\.so\.0\]' \
    && nm --defined-only "$plugin" > "$d/plugin-syms" 2>/dev/null \
    && ! grep -q ' [TtDdBbRr] wk_' "$d/plugin-syms"; then
  ok "the plugin links libwhisperknot.so.0 and holds no engine code"
else
  not_ok "the plugin links libwhisperknot.so.0 and holds no engine code"
  grep ' [TtDdBbRr] wk_' "$d/plugin-syms" | head -5 | sed 's/^/# /'
fi

# 6: embed.c builds with pkg-config's flags alone (plus the WAV reader of
# tools/, which is not part of the library): no include path into engine/
# shellcheck disable=SC2086 # $flags is a list of words
if quiet "$@" -o "$d/embed" "$WK_SOURCE_ROOT/examples/embed.c" \
    "$WK_SOURCE_ROOT/tools/wav.c" -I"$WK_SOURCE_ROOT/tools" $flags -lm; then
  ok "examples/embed.c builds with pkg-config --cflags --libs whisperknot"
else
  not_ok "examples/embed.c builds with pkg-config --cflags --libs whisperknot"
fi

# 7: at run time it loads the DESTDIR's library
LD_LIBRARY_PATH=$dest$WK_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
if ldd "$d/embed" 2>/dev/null | grep -q "libwhisperknot\.so\.0 => $dest$WK_LIBDIR/"; then
  ok "the program loads libwhisperknot.so.0 from the DESTDIR"
else
  not_ok "the program loads libwhisperknot.so.0 from the DESTDIR"
  ldd "$d/embed" 2>&1 | sed 's/^/# /'
fi

# 8: it transcribes with the installed models, printing what the build
# tree's copy of the program prints
WHISPERKNOT_VAD_MODEL=$dest$WK_VAD_MODEL
export WHISPERKNOT_VAD_MODEL
"$d/embed" "$WK_WAV" "$dest$WK_MODEL" > "$d/out" 2> "$d/err"
rc=$?
"$WK_EMBED_REF" "$WK_WAV" "$dest$WK_MODEL" > "$d/ref" 2>&1
if [ $rc -eq 0 ] && [ -s "$d/out" ] && cmp -s "$d/out" "$d/ref"; then
  ok "the installed program prints what the build tree's prints"
else
  not_ok "the installed program prints what the build tree's prints (exit $rc)"
  diff "$d/ref" "$d/out" | sed 's/^/# /'
  sed 's/^/# /' "$d/err"
fi
sed 's/^/# /' "$d/out"

# 9: and the text is the speech (only a trained model can pass)
if [ -z "$WK_EXPECT" ]; then
  skip "the text holds the expected words" "the default model is random"
else
  missing=
  for w in $WK_EXPECT; do
    grep -qi "$w" "$d/out" || missing="$missing $w"
  done
  if [ -z "$missing" ]; then
    ok "the text holds:$(printf ' %s' $WK_EXPECT)"
  else
    not_ok "the text lacks:$missing"
  fi
fi

[ $failures -eq 0 ]
