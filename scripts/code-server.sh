#!/usr/bin/env bash
# Installs code-server 4.100.0 (the last that takes Node 20) from npm into DIR (default
# /tmp/code-server) on a machine that reaches the npm registry and apt but not GitHub, then
# starts it on 127.0.0.1:8099 with the Kernelscope .vsix installed, for driving the
# extension in a real VS Code with Playwright (issue 18 item 9). Steps, as found on a
# Debian 12 host (Node 20.20, npm 11) running as root:
#   - code-server's postinstall runs `npm install` in lib/vscode, whose @vscode/ripgrep
#     postinstall downloads rg from api.github.com: install with --ignore-scripts, put
#     Debian's rg where that package expects it (its postinstall exits when bin/ exists),
#     then rebuild the native modules;
#   - node-pty's post-install runs `npx node-gyp` and needs npm_config_yes=true;
#   - argon2 (top level) must be rebuilt after --ignore-scripts;
#   - the two links postinstall.sh makes (node_modules.asar, the remote-cli script).
#     bash scripts/code-server.sh [DIR]
set -euo pipefail
DIR="${1:-/tmp/code-server}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"
export npm_config_unsafe_perm=true npm_config_yes=true
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libkrb5-dev libsecret-1-dev \
  libxkbfile-dev ripgrep >/dev/null
mkdir -p "$DIR" && cd "$DIR"
npm install --ignore-scripts --no-audit --no-fund --loglevel=error code-server@4.100.0
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
ENTRY="$DIR/node_modules/code-server/out/node/entry.js"
VSIX="$(ls "$REPO"/extension/kernelscope-*.vsix 2>/dev/null | head -1 || true)"
if [ -n "$VSIX" ]; then
  node "$ENTRY" --install-extension "$VSIX"
else
  echo "code-server.sh: no extension/kernelscope-*.vsix (cd extension && npm run package)" >&2
fi
echo "start: node $ENTRY --auth none --bind-addr 127.0.0.1:8099 --disable-telemetry WORKSPACE"
