# The Python interpreter Kernelscope installs into and runs with; sourced by setup.sh and
# scripts/kernelscope, so both pick the same one. In order: $PYTHON; the active virtualenv;
# a virtualenv in the checkout (.venv/ or venv/), activated or not; python, else python3.
kernelscope_python() {
  local root="$1"
  if [ -n "${PYTHON:-}" ]; then echo "$PYTHON"; return; fi
  if [ -n "${VIRTUAL_ENV:-}" ] && [ -x "$VIRTUAL_ENV/bin/python" ]; then
    echo "$VIRTUAL_ENV/bin/python"; return
  fi
  local venv
  for venv in "$root/.venv" "$root/venv"; do
    if [ -x "$venv/bin/python" ]; then echo "$venv/bin/python"; return; fi
  done
  command -v python || command -v python3
}
