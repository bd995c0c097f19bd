#!/usr/bin/env python3
"""User-space instructions per proxied request, passthrough against transcoding.

Wall-clock and CPU figures on a shared 2-core machine move by tens of percent from run
to run (bench/README.md); instruction counts under callgrind do not. This runs the
release `cborgate serve --mode legacy` under `valgrind --tool=callgrind` in front of a
static upstream (a thread here, serving BODY with a Content-Length), sends N sequential
keep-alive GETs as a JSON client (passthrough) and as a CBOR client (transcoding), and
prints the instructions per request: the difference between a run of N + WARM and a
run of WARM requests, divided by N, so start-up and shutdown cancel out. Kernel time is
not counted (callgrind sees user space only), nor cache misses or branch mispredictions.

    cargo build --release
    cargo bench --bench codec -- --iters 0 --dump /tmp/inputs podlist-1
    python3 bench/instructions.py /tmp/inputs/podlist-1.json            # 1,000 requests
    python3 bench/instructions.py /tmp/inputs/podlist-100.json -n 20    # a 0.87 MB list

Against pingora's own floor (bench/load's `pingora-floor`, same build and threads), as
`cborgate-load`'s "GET pod (7 KB)" runs it (request log at the default level):

    cargo build --release --locked -p cborgate -p cborgate-load
    python3 bench/instructions.py POD.json -n 300 --floor target/release/pingora-floor \
        --log-level info --path /api/v1/namespaces/load/pods/pod-0

Each process is stopped by a callgrind dump (`callgrind_control -d`) and then killed, so
pingora's graceful shutdown (seconds under valgrind) is neither waited for nor counted.
Only the client connections' work is counted (callgrind's --toggle-collect on each one's
`process_new`): `--whole` counts every thread, the request log's writer too, but also
whatever runs on a timer (cborgate's readiness probe), which grows with a run's length
under valgrind, not with its requests, and moves the figure by tens of thousands of
instructions from one run to the next. `--keep` keeps the profiles for
`callgrind_annotate` (the N + WARM run's minus the WARM run's, function by function).

Standard library only; needs valgrind (and its callgrind_control).
"""

import argparse
import glob
import os
import re
import socket
import subprocess
import sys
import threading
import time

WARM = 20


def upstream(body):
    """A static upstream on loopback answering every request with `body` as JSON."""
    answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (
        len(body),
        body,
    )
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)

    def serve(conn):
        pending = b""
        while True:
            data = conn.recv(65536)
            if not data:
                return
            pending += data
            while b"\r\n\r\n" in pending:
                _, pending = pending.split(b"\r\n\r\n", 1)
                conn.sendall(answer)

    def accept():
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener.getsockname()[1]


def read_response(conn, pending):
    """Read one response (Content-Length or chunked); return what follows it."""
    while b"\r\n\r\n" not in pending:
        pending += conn.recv(65536)
    head, pending = pending.split(b"\r\n\r\n", 1)
    status = head.split(b" ", 2)[1]
    if status != b"200":
        sys.exit(f"the proxy answered {status.decode()}: {head.decode(errors='replace')}")
    length = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
    if length:
        n = int(length.group(1))
        while len(pending) < n:
            pending += conn.recv(65536)
        return pending[n:]
    while True:
        while b"\r\n" not in pending:
            pending += conn.recv(65536)
        size, rest = pending.split(b"\r\n", 1)
        size = int(size, 16)
        while len(rest) < size + 2:
            rest += conn.recv(65536)
        pending = rest[size + 2 :]
        if size == 0:
            return pending


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def command(o, binary, up_port, port):
    """The proxy's command line under callgrind, `pingora-floor` or `cborgate serve`:
    only the work of its client connections counted (pingora's blanket `ServerApp::process_new`,
    cborgate's own in `inbound::accept`), unless --whole."""
    if o.floor is not None and binary == o.floor:
        # Not `*ServerApp>::process_new*`: that also matches `HttpServerApp>::process_new_http`,
        # nested inside, and a second match toggles collection off again.
        pattern = "<T as pingora_core::apps::ServerApp>::process_new*"
        toggle = [] if o.whole else [f"--toggle-collect={pattern}"]
        return toggle + [binary, f"127.0.0.1:{port}", f"127.0.0.1:{up_port}"]
    toggle = [] if o.whole else ["--toggle-collect=*ReadTimeout*process_new*"]
    return toggle + [binary, "serve", "--mode", "legacy",
                     "--upstream", f"http://127.0.0.1:{up_port}",
                     "--listen", f"127.0.0.1:{port}", "--admin", f"127.0.0.1:{free_port()}",
                     "--log-level", o.log_level]


def instructions(o, binary, up_port, accept, requests):
    """Total instructions of one proxy process serving `requests` GETs."""
    port = free_port()
    out = f"/tmp/cborgate-callgrind.{os.getpid()}.{port}"
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"]
        + command(o, binary, up_port, port),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    while True:
        try:
            conn = socket.create_connection(("127.0.0.1", port))
            break
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                sys.exit(f"{binary} did not start under valgrind")
            time.sleep(0.1)
    request = (
        f"GET {o.path} HTTP/1.1\r\nHost: bench\r\nAccept: {accept}\r\n\r\n"
    ).encode()
    pending = b""
    for _ in range(requests):
        conn.sendall(request)
        pending = read_response(conn, pending)
    conn.close()
    subprocess.run(["callgrind_control", "-d", str(proc.pid)],
                   stdout=subprocess.DEVNULL, timeout=600, check=True)
    proc.kill()
    proc.wait()
    total = 0
    for path in glob.glob(out + "*"):
        with open(path) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    total += int(line.split()[1])
                    break
        if o.keep:
            print(f"kept {path}")
        else:
            os.remove(path)
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("body", help="the JSON the upstream answers with")
    parser.add_argument("-n", "--requests", type=int, default=1000)
    parser.add_argument("--cborgate", default="target/release/cborgate")
    parser.add_argument("--floor", help="measure this pingora-floor too, and compare")
    parser.add_argument("--whole", action="store_true",
                        help="count every thread, not only the connections' work")
    parser.add_argument("--log-level", default="warn", help="cborgate's (info: a request line each)")
    parser.add_argument("--path", default="/api/v1/namespaces/default/pods")
    parser.add_argument("--keep", action="store_true", help="keep the callgrind profiles")
    o = parser.parse_args()
    with open(o.body, "rb") as f:
        body = f.read()
    up_port = upstream(body)
    per = {}

    def measure(name, binary, accept):
        base = instructions(o, binary, up_port, accept, WARM)
        full = instructions(o, binary, up_port, accept, WARM + o.requests)
        per[name] = (full - base) / o.requests
        print(f"{name}: {per[name]:,.0f} instructions per request "
              f"({per[name] / len(body):.1f} per body byte)")

    if o.floor is not None:
        measure("pingora-floor", o.floor, "application/json")
    for name, accept in (("passthrough", "application/json"), ("transcoding", "application/cbor")):
        measure(name, o.cborgate, accept)
    if o.floor is not None:
        print(f"passthrough / pingora-floor: {per['passthrough'] / per['pingora-floor']:.2f}x")
    print(f"transcoding / passthrough: {per['transcoding'] / per['passthrough']:.2f}x; "
          f"difference {per['transcoding'] - per['passthrough']:,.0f} per request "
          f"for {len(body):,} bytes of JSON")


if __name__ == "__main__":
    main()
