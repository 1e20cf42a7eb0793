#!/usr/bin/env bash
# Install Kernelscope and everything it needs on a Debian machine: what pyproject.toml declares
# (the explorer, Triton, the team deployment's [queue], and with --test the [test] extra), at
# the versions of scripts/constraints.txt. Safe to run again: an installed torch and triton
# are kept, so a machine with its own (e.g. CUDA) torch keeps it.
#
#   bash scripts/setup.sh          # run it: torch (CPU build), triton, the package, g++, bubblewrap
#   bash scripts/setup.sh --test   # and test it: pytest, playwright (Python), Chromium, Node.js + npm
#   bash scripts/setup.sh --which-python   # print the interpreter it installs into, and stop
#
# Environment: PYTHON (default: the active virtualenv, else .venv/ or venv/ in the checkout,
# else python, else python3: scripts/python.sh); KERNELSCOPE_TORCH (the torch to install
# when none is importable, default torch==2.13.0); KERNELSCOPE_NO_APT=1 to skip apt-get.
set -euo pipefail

usage() { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; }  # the comment above

WITH_TEST=0
WHICH_PYTHON=0
for arg in "$@"; do
  case "$arg" in
    --test) WITH_TEST=1 ;;
    --which-python) WHICH_PYTHON=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "setup.sh: unknown option $arg" >&2; usage >&2; exit 2 ;;
  esac
done

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

. "$ROOT/scripts/python.sh"
PYTHON="$(kernelscope_python "$ROOT")"
if [ "$WHICH_PYTHON" -eq 1 ]; then echo "$PYTHON"; exit 0; fi  # what it would install into
TORCH_SPEC="${KERNELSCOPE_TORCH:-torch==2.13.0}"
CONSTRAINTS="$ROOT/scripts/constraints.txt"  # the versions the test suite last ran with

say() { printf '\n== setup: %s\n' "$*"; }
pip_install() {
  "$PYTHON" -m pip install --disable-pip-version-check --root-user-action=ignore \
    --progress-bar off -q "$@"
}

# ---- Debian packages ------------------------------------------------------------------
apt_install() {
  local missing=()
  for pkg in "$@"; do
    dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root to install ${missing[*]}" >&2; return 1; }
    sudo="sudo"
  fi
  say "apt-get install ${missing[*]}"
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
}

if [ "${KERNELSCOPE_NO_APT:-0}" != "1" ] && command -v apt-get >/dev/null; then
  # g++ builds the C++ backend's kernels; bubblewrap sandboxes the server's jobs, and
  # libseccomp2 compiles its seccomp filter (server/sandbox/seccomp.py).
  pkgs=(g++ bubblewrap libseccomp2)
  if [ "$WITH_TEST" = 1 ]; then
    pkgs+=(chromium)  # Playwright drives Debian's /usr/bin/chromium (never `playwright install`)
    command -v node >/dev/null || pkgs+=(nodejs)  # the web UI's JavaScript unit tests
    pkgs+=(redis-server postgresql)  # the server tests on RQ + Redis and PostgreSQL
    command -v npm >/dev/null || pkgs+=(npm)       # the VS Code extension's build (extension/)
  fi
  apt_install "${pkgs[@]}"
else
  say "skipping apt-get (KERNELSCOPE_NO_APT=1 or no apt-get): need g++, bubblewrap, chromium"
fi

# ---- Python packages ------------------------------------------------------------------
"$PYTHON" - <<'PY' || { echo "setup: Python 3.11 or newer is needed ($PYTHON)" >&2; exit 1; }
import sys
sys.exit(0 if sys.version_info >= (3, 11) else 1)
PY

have_torch() {
  "$PYTHON" - <<'PY' 2>/dev/null
import sys
import torch
major, minor = (int(p) for p in torch.__version__.split(".")[:2])
print(torch.__version__)
sys.exit(0 if (major, minor) >= (2, 6) else 1)
PY
}

if version="$(have_torch)"; then
  say "torch $version already installed; keeping it"
else
  say "pip install $TORCH_SPEC (first and alone)"
  pip_install "$TORCH_SPEC"
fi

# The project, editable, with what pyproject.toml declares for each use. torch is installed
# above, first and alone, so that nothing else can pull a (multi-GB, CUDA) torch of its own
# choosing; an installed triton is kept (a CUDA torch needs the exact triton it was built
# with), so then neither the [triton] extra nor its pin is asked for.
extras="queue"
pins="$(mktemp)"
trap 'rm -f "$pins"' EXIT
if "$PYTHON" -c "import triton" 2>/dev/null; then
  grep -v '^triton==' "$CONSTRAINTS" >"$pins"
else
  extras="triton,$extras"
  cp "$CONSTRAINTS" "$pins"
fi
[ "$WITH_TEST" = 1 ] && extras="$extras,test"
isolation=()
# An isolated build env would fetch setuptools again on every run; use the installed one.
"$PYTHON" -c "import setuptools, sys; sys.exit(int(setuptools.__version__.split('.')[0]) < 68)" \
  2>/dev/null && isolation=(--no-build-isolation)
say "pip install -e .[$extras] -c scripts/constraints.txt"
pip_install -e ".[$extras]" -c "$pins" "${isolation[@]}"
command -v pyenv >/dev/null && pyenv rehash || true  # make the `kernelscope` shim visible

# ---- check ----------------------------------------------------------------------------
"$PYTHON" - <<'PY'
import torch
from kernelscope import compiler

try:
    import triton
    triton_version = triton.__version__
except ImportError:
    triton_version = "missing"
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
print(f"\nkernelscope {compiler.__version__}: torch {torch.__version__}, triton {triton_version}, "
      f"GPU {gpu}")
PY
if [ "$(command -v kernelscope || true)" != "$(dirname "$PYTHON")/kernelscope" ]; then
  echo "setup: run Kernelscope as scripts/kernelscope (it uses $PYTHON)" >&2
fi
say "done"
