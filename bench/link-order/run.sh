#!/usr/bin/env bash
# Regenerates crates/gateway/link-order.txt: the functions the release gateway runs on every
# turn (start-up, tools/list, 100 guides, 1,000 calls over 1,000 apps), in the order they
# first run, read from valgrind's instruction trace and named through the linker's map.
# Symbol names carry hashes of the toolchain, the dependency versions and the features Cargo
# unified, so the list holds the names of both usual builds: the gateway alone
# (`cargo install`, `cargo run -p aai-gateway`) and the whole workspace (`bench/run.sh`).
# Run it after a dependency or toolchain change; a stale list only orders less.
set -euo pipefail
cd "$(dirname "$0")/../.."
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 2; }
work=$(mktemp -d)
trap 'kill $(cat "$work/bus.pid" 2>/dev/null) 2>/dev/null || true; rm -rf "$work"' EXIT
cargo build --release -p aai-test-support --bins
dbus-daemon --session --fork --print-address=1 --print-pid=3 3>"$work/bus.pid" >"$work/bus.address"
export DBUS_SESSION_BUS_ADDRESS=$(head -1 "$work/bus.address")
for name in gateway workspace; do
  if [ "$name" = gateway ]; then build=(-p aai-gateway); else build=(--workspace); fi
  AAI_LINK_MAP="$work/$name.map" cargo build --release "${build[@]}" --bins
  python3 bench/link-order/order.py "$work" target/release "$work/$name.map" "$work/$name.txt"
done
awk '!seen[$0]++' "$work/gateway.txt" "$work/workspace.txt" > crates/gateway/link-order.txt
wc -l crates/gateway/link-order.txt
cargo build --release --workspace --bins
