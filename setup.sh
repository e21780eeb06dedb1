#!/usr/bin/env bash
# Installs pyparbench and everything it needs on a Debian machine, then runs
# the main job or the tests:
#
#   bash setup.sh run     # install, then `pyparbench run` (the default suite)
#   bash setup.sh test    # install, then the test suite
#   bash setup.sh         # install only
#
# System packages come from apt (installed when run as root; otherwise the
# apt-get line to run is printed). Python packages go into ./.venv.
set -euo pipefail
cd "$(dirname "$0")"

action="${1:-install}"
case "$action" in install|run|test) ;; *)
  echo "usage: bash setup.sh [install|run|test]" >&2; exit 2;;
esac

# oneDNN (Debian 12: 2.6, Debian 13: 3.x), hwloc, Eigen, OpenBLAS, a compiler.
apt_packages=(g++ make pkg-config git libdnnl-dev libhwloc-dev hwloc libeigen3-dev libopenblas-dev)
if ! python3 -c "import venv, ensurepip" >/dev/null 2>&1; then
  apt_packages+=(python3-venv python3-dev)
fi
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -eq 0 ]]; then
    echo "==> apt-get install ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "Missing system packages. Run this, then run setup.sh again:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

if [[ ! -x .venv/bin/python ]]; then
  echo "==> creating .venv"
  python3 -m venv .venv
fi
echo "==> building and installing pyparbench (libdnnl-dev $(dpkg-query -W -f='${Version}' libdnnl-dev))"
.venv/bin/python -m pip install -q --upgrade pip
# torch first, pinned: the CPU build of this version is what the comparisons
# use, and the extras' range is then met without fetching another build.
.venv/bin/python -m pip install -q "torch==2.13.0"
# llm builds llama.cpp from source the first time (pip caches the wheel).
.venv/bin/python -m pip install -q ".[test,bench,frameworks,llm]"

case "$action" in
  run)
    exec .venv/bin/pyparbench run;;
  test)
    # Run from tests/'s parent but import the installed package: pytest's
    # entry point does not put the current directory on sys.path.
    exec .venv/bin/pytest -q -p no:cacheprovider tests;;
esac
