#!/usr/bin/env bash
# Builds the fuzz targets with libFuzzer's coverage instrumentation on stable Rust (the
# same flags cargo-fuzz passes, without a sanitizer) and runs each for N seconds.
# Usage: bash fuzz/run.sh [seconds-per-target]   (default 5; 0 only builds)
set -euo pipefail
cd "$(dirname "$0")"
seconds="${1:-5}"
target="$(rustc -vV | sed -n 's/^host: //p')"
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
 -Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
 -Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
cargo build --release --target "$target"
[ "$seconds" = 0 ] && exit 0
for t in verify_headers sender_verify template_render filter_compile_eval sse_decode payload_pick \
  api_chat_request api_response_request rpc_frame acp_lines plugin_lines; do
  mkdir -p "corpus/$t" "seeds/$t"
  echo "fuzz: $t for ${seconds}s"
  # seeds/ holds committed regressions (read, never written); corpus/ grows locally.
  "./target/$target/release/$t" "corpus/$t" "seeds/$t" -max_total_time="$seconds" -rss_limit_mb=512 -print_final_stats=0 2>&1 | tail -n 1
done
