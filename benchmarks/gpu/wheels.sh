#!/usr/bin/env bash
# Fetch exactly the wheels the GPU machine's image lacks into .whl/ (ignored by git), for run.sh:
#
#     bash benchmarks/gpu/wheels.sh            # wheels-core.txt: msgspec, IPython and its needs (~7 MiB)
#     bash benchmarks/gpu/wheels.sh --report   # also wheels-report.txt: the optional report section (~48 MiB in all)
#
# Each for CPython 3.12 on manylinux x86_64, --no-deps (every dependency is named in the lists),
# one version of each. .whl/ is replaced whole, so it holds the listed wheels and nothing else.
# Fails when they exceed 60 MiB (the device tool carries 64 MiB per call, the working tree included;
# the tree's own size is printed too). Settings: PYTHON (default python3), WHL_DIR (default .whl).
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
DEST=${WHL_DIR:-.whl}
LIMIT_MIB=60
lists=("$HERE/wheels-core.txt")
case "${1:-}" in
    --report) lists+=("$HERE/wheels-report.txt") ;;
    "") ;;
    *) echo "usage: $0 [--report]" >&2; exit 2 ;;
esac
mapfile -t specs < <(cat "${lists[@]}" | sed 's/#.*//; s/[[:space:]]//g' | grep -v '^$')

tmp="$DEST.partial"
rm -rf "$tmp"
mkdir -p "$tmp"
platforms=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_26_x86_64 manylinux_2_24_x86_64 \
         manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux2010_x86_64 manylinux1_x86_64 manylinux_2_5_x86_64; do
    platforms+=(--platform "$p")
done
echo "fetching ${#specs[@]} wheels for cp312 manylinux x86_64 into $DEST"
"$PY" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$tmp" "${specs[@]}" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2)

# exactly one wheel per listed project, none unlisted
"$PY" - "$tmp" "${specs[@]}" <<'EOF'
import re, sys
from pathlib import Path
folder, specs = Path(sys.argv[1]), sys.argv[2:]
norm = lambda s: re.sub(r"[-_.]+", "-", s).lower()
wanted = {norm(s.split("==")[0]): s.split("==")[1] for s in specs}
found = {}
for whl in sorted(folder.glob("*.whl")):
    name, version = whl.name.split("-")[:2]
    found.setdefault(norm(name), []).append(version)
problems = [f"{n}: {len(v)} versions {v}" for n, v in found.items() if len(v) != 1]
problems += [f"{n}: not listed" for n in found if n not in wanted]
problems += [f"{n}=={v}: not fetched" for n, v in wanted.items() if n not in found]
problems += [f"{n}: fetched {found[n][0]}, listed {v}" for n, v in wanted.items() if n in found and found[n][0] != v]
if problems:
    sys.exit("wheels.sh: " + "; ".join(problems))
EOF

bytes=$(du -cb "$tmp"/*.whl | tail -n 1 | cut -f1)
mib=$(awk -v b="$bytes" 'BEGIN{printf "%.1f", b/1048576}')
if (( bytes > LIMIT_MIB * 1048576 )); then
    echo "wheels.sh: the wheels take $mib MiB, over the $LIMIT_MIB MiB limit; left in $tmp" >&2
    exit 1
fi
rm -rf "$DEST"
mv "$tmp" "$DEST"
tree_bytes=$(git ls-files -co --exclude-standard -z 2>/dev/null | xargs -0 -r du -cb 2>/dev/null \
             | awk '$2 == "total" {s += $1} END {printf "%d", s}')
tree_mib=$(awk -v b="${tree_bytes:-0}" 'BEGIN{printf "%.1f", b/1048576}')
total=$(awk -v a="$bytes" -v b="${tree_bytes:-0}" 'BEGIN{printf "%.1f", (a+b)/1048576}')
echo "$DEST: $(ls "$DEST"/*.whl | wc -l) wheels, $mib MiB (limit $LIMIT_MIB MiB); working tree $tree_mib MiB; together $total MiB of the 64 MiB a device call carries"
if awk -v t="$total" 'BEGIN{exit !(t > 64)}'; then
    echo "wheels.sh: the working tree and the wheels exceed 64 MiB together: the device call would be refused" >&2
    exit 1
fi
