#!/usr/bin/env bash
# Installs the system packages the Fyne desktop app builds against, when
# they are missing and we have the rights; otherwise prints the command.
set -u
need=()
for p in libgl1-mesa-dev xorg-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
[ ${#need[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "k3: the desktop app needs OpenGL and X11 development files (Debian: ${need[*]})." >&2
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}"
else
  echo "k3: missing system packages for the desktop app. Run:" >&2
  echo "    sudo apt-get install -y ${need[*]}" >&2
  exit 1
fi
