#!/usr/bin/env bash
# Builds the release binaries and runs the end-to-end benchmarks; prints a table.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --workspace --bins
exec target/release/aai-bench "$@"  # `desktop`: the desktop-control measurements
