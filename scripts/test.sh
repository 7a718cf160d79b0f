#!/usr/bin/env bash
# Sets up the machine (idempotent) and runs every test: lint, host tests, release build and the classic
# files' size budgets, browser tests in Chromium and Firefox, the builds in old JavaScript engines,
# end-to-end tests (the lease service's among them, each starting and stopping its own service instances
# and PostgreSQL cluster). Ends with one summary line "N passed, M failed".
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh || { echo "setup failed"; exit 1; }
export PATH="$PWD/node_modules/.bin:$HOME/.cargo/bin:$PATH"
logs=$(mktemp -d)
failed_steps=()
step_times=()
step() {
  local name=$1; shift
  printf '\n== test: %s\n' "$name"
  local start=$SECONDS
  if "$@" 2>&1 | tee "$logs/$name.log"; then
    printf '== test: %s ok (%ss)\n' "$name" $((SECONDS - start))
    step_times+=("$name $((SECONDS - start))s")
  else
    printf '== test: %s FAILED (%ss)\n' "$name" $((SECONDS - start))
    step_times+=("$name $((SECONDS - start))s FAILED")
    failed_steps+=("$name")
  fi
}

# --workspace: the weblocks crate and the lease service (lease-server/); `cargo test` also builds the
# service's debug binary, which the e2e tests of the service start.
step fmt cargo fmt --all --check
# Every module of src/, js/ and the simulated world has its line in docs/ARCHITECTURE.md.
step architecture node scripts/architecture_lines.mjs
step clippy-host cargo clippy --workspace --all-targets -- -D warnings
step clippy-wasm cargo clippy --target wasm32-unknown-unknown --lib -- -D warnings
# The two wasm modules the build ships, each with its own features (Cargo.toml, scripts/build.mjs).
step clippy-wasm-locks cargo clippy --target wasm32-unknown-unknown --lib --no-default-features --features coordination -- -D warnings
step clippy-wasm-leases cargo clippy --target wasm32-unknown-unknown --lib --no-default-features --features leases -- -D warnings
step cargo-test cargo test --workspace
step build npm run build
# The classic script and its leases' add-on within their budgets (scripts/size/sizes.mjs, docs/SIZE.md):
# over either, this step fails.
step size-budget node scripts/size/sizes.mjs --check
# The checks that read sources and the built files, no browser (tests/static/): the numbers both sides of the
# wasm boundary name, the shipped files' syntax and wasm features, the inflater, the lease deadline.
step static node --test tests/static/
export WASM_BINDGEN_TEST_TIMEOUT=120  # the runner's budget for a whole test binary (default 20 s)
# The ponyfill's browser tests (tests/web.rs), through wasm-bindgen's own runner (wasm-bindgen-cli installs
# it): cargo runs each wasm test binary with it, and it drives the browser whose driver is set (one per run).
# A browser whose page never reported (the runner's "Failed to detect test as having been run": its page did not
# load, as headless Chromium does now and then on a fresh machine), or whose driver hung before any test ran (the
# runner bounds the driver's start and the tests, not its WebDriver calls, such as a navigation that never loads), is
# given one more try, and says so; a test that ran and failed is not. The binary is built first, outside the
# bound, so that a cold compile is not mistaken for a hang.
wasm_browser_tests() {
  local out rc try
  local cmd=(env "$@" CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner cargo test --target wasm32-unknown-unknown --test web)
  "${cmd[@]}" --no-run || return 1
  out=$(mktemp)
  for try in 1 2; do
    timeout --kill-after=15 300 "${cmd[@]}" 2>&1 | tee "$out"
    rc=${PIPESTATUS[0]}
    [ "$rc" -ne 0 ] && [ "$try" -eq 1 ] || break
    if grep -q 'Failed to detect test as having been run' "$out"; then
      echo "wasm browser tests: the browser's page never ran them; once more"
    elif { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && ! grep -q '^test .* \.\.\. ' "$out"; then
      echo "wasm browser tests: the browser or its driver hung for 300 s before any test reported; once more"
    else
      break
    fi
  done
  rm -f "$out"
  return "$rc"
}
step wasm-chrome wasm_browser_tests CHROMEDRIVER="$(command -v chromedriver)"
step wasm-firefox wasm_browser_tests GECKODRIVER="$(command -v geckodriver)"
# The builds in old JavaScript engines (the V8 of Chrome 51 to 94), in worker-shaped contexts.
step old-engines node --test --test-timeout=600000 tests/old_engines/
# End to end, one step per group of tests/e2e/ (docs/DEVELOPMENT.md says what each checks and costs), so that a
# red step names the layer that broke: the platform's assumptions per engine, the protocol across contexts,
# the facade's conformance, the leases, the lease service, the package. A hung browser or process fails its
# test after 4 minutes instead of stalling the run.
for group in platform protocol facade leases lease_service package; do
  step "e2e-$group" node --test --test-concurrency=1 --test-timeout=240000 "tests/e2e/$group/"
done

# Sum what each runner reported: cargo's "test result: ... N passed; M failed" and node's "# pass N"/"# fail N".
passed=0; failed=0
for f in "$logs"/*.log; do
  p=$(grep -hoE 'test result: [a-zA-Z]+\. [0-9]+ passed' "$f" | grep -oE '[0-9]+ passed' | awk '{s+=$1} END {print s+0}')
  q=$(grep -hoE '; [0-9]+ failed;' "$f" | grep -oE '[0-9]+' | awk '{s+=$1} END {print s+0}')
  np=$(grep -hE '^# pass [0-9]+' "$f" | awk '{s+=$3} END {print s+0}')
  nf=$(grep -hE '^# fail [0-9]+' "$f" | awk '{s+=$3} END {print s+0}')
  passed=$((passed + p + np)); failed=$((failed + q + nf))
done
rm -rf "$logs"
echo
echo "seconds per step (docs/DEVELOPMENT.md's table of what a group costs): ${step_times[*]/%/,}"
if [ ${#failed_steps[@]} -gt 0 ]; then
  echo "failed steps: ${failed_steps[*]}"
  [ "$failed" -gt 0 ] || failed=${#failed_steps[@]}
fi
echo "$passed passed, $failed failed"
[ ${#failed_steps[@]} -eq 0 ]
