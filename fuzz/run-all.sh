#!/bin/sh
# Run every fuzz target in turn, one at a time, for SECONDS each (default 600).
# Usage: fuzz/run-all.sh [SECONDS]
# Exits non-zero if any target found a crash (see fuzz/artifacts/<target>/).
set -u
cd "$(dirname "$0")"
secs="${1:-600}"
{ [ -d corpus/json_to_cbor ] && [ -d corpus/negotiation ]; } || ./seed-corpus.py
cargo +nightly fuzz build -O || exit 1
failed=""
for t in json_to_cbor cbor_to_json watch_streams negotiation; do
    case "$t" in
        watch_streams) extra="" ;;
        negotiation) extra="-max_len=4096" ;;
        *) extra="-max_len=16384" ;;
    esac
    mkdir -p "corpus/$t"
    echo "== $t (${secs}s)"
    cargo +nightly fuzz run -O "$t" -- $extra \
        -max_total_time="$secs" -rss_limit_mb=2048 -timeout=5 -print_final_stats=1 \
        || failed="$failed $t"
done
if [ -n "$failed" ]; then
    echo "crashes in:$failed" >&2
    exit 1
fi
echo "all targets ran ${secs}s without a crash"
