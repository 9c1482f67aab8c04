# Sourced by tools/wine/run and tools/wine/window: a Wine prefix ready for Go
# programs (see tools/wine/run for the two work-arounds), and $work/overlay.json
# for building test binaries.
# WINEPREFIX defaults to a private prefix under ${TMPDIR:-/tmp}; $here is the
# caller's directory (this one).
export WINEPREFIX=${WINEPREFIX:-${TMPDIR:-/tmp}/k3-wine}
export WINEDEBUG=${WINEDEBUG:--all}
# no Mono or Gecko installer prompts: nothing here needs .NET or a browser
export WINEDLLOVERRIDES=${WINEDLLOVERRIDES:-mscoree,mshtml=}
work=${TMPDIR:-/tmp}/k3-wine-build
mkdir -p "$work"
if [ ! -f "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" ]; then
  wineboot -i >/dev/null 2>&1 || true
  wineserver -w || true
  x86_64-w64-mingw32-gcc -O2 -shared -o "$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" \
    "$here/bcryptprimitives.c" "$here/bcryptprimitives.def" -lbcrypt
fi
src=$(go env GOROOT)/src/internal/syscall/windows/at_windows.go
sed 's|^\tcase STATUS_INVALID_INFO_CLASS, |\tcase NTStatus(0xC0000002), // STATUS_NOT_IMPLEMENTED (Wine)\n\t\tSTATUS_INVALID_INFO_CLASS, |' "$src" > "$work/at_windows.go"
grep -q 0xC0000002 "$work/at_windows.go" || { echo "tools/wine: could not patch $src for Wine" >&2; exit 1; }
printf '{"Replace":{"%s":"%s"}}' "$src" "$work/at_windows.go" > "$work/overlay.json"
