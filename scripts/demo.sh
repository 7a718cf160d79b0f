#!/usr/bin/env bash
# Sets up the machine (idempotent), builds the release package and the lease service, and serves the demo.
# PORT (default 8080) and HOST (default 127.0.0.1) choose where; open http://HOST:PORT/www/ in several tabs.
# The lease service (weblocks-lease-server) runs alongside on LEASE_PORT (default 8787) with its embedded
# SQLite database (LEASE_DB, default weblocks-leases.sqlite3 in the working directory), for the edit form
# between users (http://HOST:PORT/www/edit-form.html?user=alice and ?user=bob). Its token secret is made
# up for this run, and the token minter the demo serves is DEV ONLY (anyone gets any demo user's token).
# ORIGINS overrides the pages' origins the service accepts (e.g. http://192.168.1.20:8080 on a LAN).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
npm run build
cargo build --profile server -p weblocks-lease-server

host=${HOST:-127.0.0.1}
port=${PORT:-8080}
lease_port=${LEASE_PORT:-8787}
WEBLOCKS_LEASE_SECRET=$(node -e "console.log(require('node:crypto').randomBytes(32).toString('hex'))")
export WEBLOCKS_LEASE_SECRET
origins="http://$host:$port,http://localhost:$port"
[ "$host" = 127.0.0.1 ] || origins="$origins,http://127.0.0.1:$port"
target/server/weblocks-lease-server \
  --listen "$host:$lease_port" \
  --database "sqlite:${LEASE_DB:-weblocks-leases.sqlite3}" \
  --origins "${ORIGINS:-$origins}" &
lease_service=$!
trap 'kill "$lease_service" 2>/dev/null; wait "$lease_service" 2>/dev/null' EXIT
node scripts/serve.mjs --host "$host" --port "$port" --lease-port "$lease_port"
