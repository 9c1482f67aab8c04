#!/usr/bin/env bash
# Runs every `func FuzzXxx` target in the module for a short time each.
set -euo pipefail
t=${1:-2000x}
cd "$(dirname "$0")/.."
grep -rl --include='*_test.go' '^func Fuzz' . | while read -r f; do
  pkg=./$(dirname "${f#./}")
  grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //' | while read -r name; do
    echo "fuzz $pkg $name ($t)"
    go test -run '^$' -fuzz "^${name}\$" -fuzztime "$t" "$pkg" >/tmp/k3-fuzz.log 2>&1 || { cat /tmp/k3-fuzz.log; exit 1; }
  done
done
