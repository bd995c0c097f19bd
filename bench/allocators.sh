#!/bin/sh
# Which allocator cborgate runs on (bench/README.md "Allocator"), measured in one run:
#   bench/allocators.sh [ROUNDS] [SECONDS]
# Builds cborgate three times (glibc's malloc, jemalloc, mimalloc: the `jemalloc` and
# `mimalloc` features, one at a time) and pingora-floor (pingora's proxy with empty
# callbacks, the anchor), puts each in turn in front of nginx serving a 5 KB Pod, and
# loads it with wrk (-t1 -c16, keep-alive), interleaved, ROUNDS (2) times SECONDS (4) s.
# For each: CPU µs per request (utime + stime from /proc), futex calls and context
# switches per request (`perf stat`, software tracepoints), peak RSS. Needs nginx, wrk
# and perf (Debian packages nginx, wrk, linux-perf).
set -eu
cd "$(dirname "$0")/.."
R=${1:-2} S=${2:-4}
for c in nginx wrk perf; do
  command -v "$c" >/dev/null 2>&1 || [ -x "/usr/sbin/$c" ] || { echo "allocators.sh: $c is needed" >&2; exit 2; }
done
out=$(mktemp -d); trap 'kill $(cat "$out/nginx.pid" 2>/dev/null) 2>/dev/null; rm -rf "$out"' EXIT
t=${CARGO_TARGET_DIR:-target}
cargo build --release --locked -p cborgate-load --bin pingora-floor
cp "$t/release/pingora-floor" "$out/floor"
for a in glibc jemalloc mimalloc; do
  case $a in glibc) f="--no-default-features" ;; *) f="--no-default-features --features $a" ;; esac
  # shellcheck disable=SC2086 # the feature flags are words
  cargo build --release --locked -p cborgate $f
  cp "$t/release/cborgate" "$out/$a"
done
cargo build --release --locked -p cborgate # back to the default build
mkdir -p "$out/www/api/v1/namespaces/load/pods"
python3 - "$out/www/api/v1/namespaces/load/pods/p" <<'PY'
import json, sys
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "load", "labels": {"a": "b" * 50}},
       "spec": {"containers": [{"name": "c%d" % i, "image": "x" * 100, "args": ["y" * 200]} for i in range(14)]}}
open(sys.argv[1], "w").write(json.dumps(pod))
PY
up=127.0.0.1:31100 at=127.0.0.1:31200 admin=127.0.0.1:31201
cat > "$out/nginx.conf" <<NGX
worker_processes 1; daemon on; error_log $out/err.log; pid $out/nginx.pid;
events {}
http { access_log off; default_type application/json;
  server { listen $up; root $out/www; keepalive_requests 1000000; } }
NGX
nginx -c "$out/nginx.conf"
url=http://$at/api/v1/namespaces/load/pods/p
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
echo "allocators.sh: $(git rev-parse --short HEAD), $R rounds of $S s, load average $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$R"); do
  for name in floor glibc jemalloc mimalloc; do
    if [ $name = floor ]; then
      "$out/floor" $at $up >"$out/$name.log" 2>&1 &
    else
      "$out/$name" serve --listen $at --admin $admin --mode legacy --upstream "http://$up" >"$out/$name.log" 2>&1 &
    fi
    pid=$!
    i=0; until curl -sf -o /dev/null "$url"; do i=$((i + 1)); [ $i -lt 100 ] || exit 1; sleep 0.1; done
    wrk -t1 -c16 -d1s "$url" >/dev/null
    c0=$(cpu $pid)
    perf stat -x, -e syscalls:sys_enter_futex,context-switches -p $pid -o "$out/perf" 2>/dev/null &
    pp=$!
    n=$(wrk -t1 -c16 -d"${S}s" "$url" | awk '/requests in/ {print $1}')
    kill -INT $pp; wait $pp 2>/dev/null || true
    c1=$(cpu $pid)
    fx=$(grep futex "$out/perf" | cut -d, -f1); cs=$(grep context "$out/perf" | cut -d, -f1)
    rss=$(awk '/VmHWM/ {print $2}' "/proc/$pid/status")
    kill $pid; wait $pid 2>/dev/null || true
    awk -v n="$n" -v c=$((c1 - c0)) -v f="$fx" -v s="$cs" -v name=$name -v rss="$rss" -v hz="$(getconf CLK_TCK)" 'BEGIN {
      printf "%-9s %7d requests  CPU %6.1f us/request  futex %5.2f/request  context switches %5.2f/request  peak RSS %6d KiB\n",
        name, n, c * 1e6 / hz / n, f / n, s / n, rss }'
  done
done
