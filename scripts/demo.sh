#!/usr/bin/env bash
# Sets up the machine (idempotent), builds the release package and serves the demo.
# PORT (default 8080) and HOST (default 127.0.0.1) choose where; open http://HOST:PORT/www/ in several tabs.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
npm run build
exec node scripts/serve.mjs --host "${HOST:-127.0.0.1}" --port "${PORT:-8080}"
