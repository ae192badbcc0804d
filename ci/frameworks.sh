#!/usr/bin/env bash
# Build (or reuse) the framework environment pinned in ci/frameworks.txt and print its
# python. Cached outside the repository, keyed by the file's hash, so CI on one machine
# builds it once and a new pin (or a fresh machine) rebuilds it.
#   PYTHON312   the interpreter (default: pyenv's 3.12.1, else python3.12 on PATH)
#   DESIGNER_FRAMEWORKS_CACHE   the cache root (default ~/.cache/designer-frameworks)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
req="$here/frameworks.txt"
py="${PYTHON312:-$HOME/.pyenv/versions/3.12.1/bin/python3}"
[ -x "$py" ] || py="$(command -v python3.12 || true)"
[ -n "$py" ] || { echo "ci/frameworks.sh: no Python 3.12 (megatron-core 0.19 needs >= 3.12); set PYTHON312" >&2; exit 2; }
hash="$(sha256sum "$req" | cut -c1-16)"
root="${DESIGNER_FRAMEWORKS_CACHE:-$HOME/.cache/designer-frameworks}/$hash"
if [ ! -f "$root/ok" ]; then
    start=$SECONDS
    rm -rf "$root"
    "$py" -m venv "$root" >&2
    # this venv only: a machine-wide pip constraint (e.g. a torch cap in /etc/xdg/pip) must
    # not apply to the pinned torch; no dependency resolution, every package is in the file
    PIP_CONFIG_FILE=/dev/null PIP_CONSTRAINT="" "$root/bin/python" -m pip install --quiet \
        --disable-pip-version-check --no-deps -r "$req" >&2
    echo "$((SECONDS - start))" > "$root/install_seconds"
    touch "$root/ok"
    echo "ci/frameworks.sh: built $root in $((SECONDS - start)) s" >&2
fi
echo "$root/bin/python"
