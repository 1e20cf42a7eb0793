#!/usr/bin/env bash
# The extension inside a real VS Code, end to end: installs code-server (cached), builds
# and packages the extension, then runs scripts/code_server_smoke.py, which installs the
# .vsix into a fresh code-server profile and drives it headless with Playwright (docs/extension.md,
# "Inside a real VS Code"). Exits non-zero when any step or check fails.
#
#     bash scripts/code-server.sh [--install-only] [--no-build] [--out DIR]
#
# --no-build uses the extension/kernelscope-*.vsix already there (CI packages it just before).
# CODE_SERVER_DIR (default ~/.cache/kernelscope/code-server-4.100.0) holds the install; a
# complete one (its .installed marker) is reused. code-server 4.100.0 is the last release that
# takes Node 20 (4.101+ needs Node 22, 4.139 Node 24). It installs from the npm registry on a
# host that reaches npm and apt but not GitHub (Debian 12, Node 20, npm 11, as root):
#   - root: npm_config_unsafe_perm=true, or the install scripts run as nobody and fail;
#   - native modules (argon2, node-pty, @parcel/watcher, kerberos, native-keymap, spdlog)
#     build with node-gyp against libkrb5-dev, libsecret-1-dev, libxkbfile-dev;
#   - code-server's postinstall runs `npm install` in lib/vscode, where @vscode/ripgrep's
#     postinstall downloads rg from api.github.com (unreachable): install with
#     --ignore-scripts, put Debian's rg where that package expects it (its postinstall exits
#     when bin/ exists), then `npm rebuild` the native modules;
#   - node-pty's install runs `npx node-gyp` and needs npm_config_yes=true;
#   - the links code-server's postinstall.sh makes (node_modules.asar, the remote CLI).
set -euo pipefail
REPO="$(cd "$(dirname "$0")/.." && pwd)"
VERSION=4.100.0
DIR="${CODE_SERVER_DIR:-$HOME/.cache/kernelscope/code-server-$VERSION}"
PYTHON="${PYTHON:-$(command -v python || command -v python3)}"
INSTALL_ONLY=0
BUILD=1
ARGS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --install-only) INSTALL_ONLY=1 ;;
    --no-build) BUILD=0 ;;
    *) ARGS+=("$1") ;;
  esac
  shift
done
say() { echo "code-server.sh: $*" >&2; }
t0=$SECONDS

node -e 'process.exit(Number(process.versions.node.split(".")[0]) === 20 ? 0 : 1)' \
  || { say "code-server $VERSION needs Node.js 20 (found $(node --version))"; exit 1; }

if [ ! -f "$DIR/.installed" ]; then
  say "installing code-server $VERSION into $DIR"
  export npm_config_unsafe_perm=true npm_config_yes=true
  if ! command -v rg >/dev/null || ! dpkg -s libkrb5-dev libsecret-1-dev libxkbfile-dev >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libkrb5-dev libsecret-1-dev \
      libxkbfile-dev ripgrep >/dev/null
  fi
  rm -rf "$DIR" && mkdir -p "$DIR"
  (
    cd "$DIR"
    npm install --ignore-scripts --no-audit --no-fund --loglevel=error "code-server@$VERSION"
    npm rebuild argon2 --loglevel=error
    cd node_modules/code-server/lib/vscode
    npm install --ignore-scripts --omit=dev --no-audit --no-fund --loglevel=error
    mkdir -p node_modules/@vscode/ripgrep/bin
    cp "$(command -v rg)" node_modules/@vscode/ripgrep/bin/rg
    npm rebuild --loglevel=error
    (cd extensions && npm install --omit=dev --no-audit --no-fund --loglevel=error)
    ln -sfn node_modules node_modules.asar
    (cd bin/remote-cli && ln -sf code-linux.sh code-server)
    (cd bin/helpers && ln -sf browser-linux.sh browser.sh)
  )
  touch "$DIR/.installed"
  say "installed in $((SECONDS - t0)) s"
else
  say "code-server $VERSION already installed in $DIR"
fi
[ "$INSTALL_ONLY" = 1 ] && exit 0

t1=$SECONDS
if [ "$BUILD" = 1 ]; then
  (
    cd "$REPO/extension"
    npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
    npm run --silent build
    rm -f kernelscope-*.vsix
    npm run --silent package >/dev/null
  )
  say "built the extension in $((SECONDS - t1)) s"
fi
VSIX="$(ls "$REPO"/extension/kernelscope-*.vsix 2>/dev/null | head -1 || true)"
[ -n "$VSIX" ] || { say "no extension/kernelscope-*.vsix (run without --no-build)"; exit 1; }

# PYTHONPATH: the server the extension starts (python -P -m kernelscope.server) is this tree's,
# whatever checkout the installed package points at.
PYTHONPATH="$REPO${PYTHONPATH:+:$PYTHONPATH}" "$PYTHON" "$REPO/scripts/code_server_smoke.py" \
  --code-server "$DIR/node_modules/code-server/out/node/entry.js" --vsix "$VSIX" "${ARGS[@]}"
say "done in $((SECONDS - t0)) s"
