#!/usr/bin/env bash
# check_format.sh [FILE ...]: every C++ source of the repository (or the files named) is formatted as .clang-format
# says, by clang-format 14 (Debian's clang-format package; another major version formats some constructs otherwise).
# Exit 1 with one line per file that differs and the command that fixes it; 2 when clang-format-14 is missing.
# A registered test (`format`) runs it on the whole tree; `tests/check_format.sh $(git diff --name-only main)` checks a
# change before it is committed.
set -euo pipefail
cd "$(dirname "$0")/.."
cf=$(command -v clang-format-14 || true)
[ -n "$cf" ] || { echo "check_format: clang-format-14 not found (hint: apt-get install clang-format-14, or bash scripts/setup.sh)" >&2; exit 2; }
if [ $# -gt 0 ]; then
  files=()
  for f in "$@"; do
    case "$f" in *.cpp|*.h|*.inc) [ -f "$f" ] && files+=("$f") ;; esac
  done
else
  mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.inc' 2>/dev/null | grep -v '^tests/fixtures/' ||
                       find core kernels data memory model train storage sweep infer eval cli bench tests \
                         \( -name '*.cpp' -o -name '*.h' -o -name '*.inc' \) -not -path 'tests/fixtures/*')
fi
bad=0
for f in "${files[@]}"; do
  if ! "$cf" --style=file --dry-run -Werror "$f" >/dev/null 2>&1; then
    echo "check_format: $f is not formatted (fix: clang-format-14 -i --style=file $f)"
    bad=$((bad + 1))
  fi
done
echo "check_format: ${#files[@]} files, $bad not formatted"
[ "$bad" -eq 0 ]
