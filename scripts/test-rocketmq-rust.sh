#!/usr/bin/env bash
# The tests against rocketmq-rust 1.0.0, a second, independent broker beside the real Apache
# RocketMQ: builds its name server and broker from crates.io once per machine into
# $RMQSTORE_PEERS/bin (default ~/.cache/rmqstore-peers; 25-45 minutes on 2 cores, which is why
# CI leaves it out), then runs the tests that start it (their names end in `::rocketmq_rust`).
#   scripts/test-rocketmq-rust.sh                 install if needed, then test
#   scripts/test-rocketmq-rust.sh --install-only  install if needed
# Under CI=true with RMQSTORE_ROCKETMQ_RUST=1 a missing install fails those tests.
set -euo pipefail
cd "$(dirname "$0")/.."
export RMQSTORE_PEERS="${RMQSTORE_PEERS:-$HOME/.cache/rmqstore-peers}"
export RMQSTORE_ROCKETMQ_RUST=1
version=1.0.0
installed() {
  local b
  for b in rocketmq-namesrv-rust rocketmq-broker-rust; do
    "$RMQSTORE_PEERS/bin/$b" --version 2>/dev/null | grep -qx "version=$version" || return 1
  done
}
if ! installed; then
  # one target directory for both, so the broker reuses what the name server's build compiled
  cargo install --locked "rocketmq-namesrv@$version" "rocketmq-broker@$version" \
    --root "$RMQSTORE_PEERS" --target-dir "$RMQSTORE_PEERS/build"
  rm -rf "$RMQSTORE_PEERS/build"
  installed
  # the build script looks for the programs once: make it look again
  touch build.rs
fi
if [ "${1:-}" = "--install-only" ]; then
  exit 0
fi
cargo test --locked --test all -- rocketmq_rust
