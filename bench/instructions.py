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

Standard library only; needs valgrind.
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


def instructions(binary, up_port, accept, requests):
    """Total instructions of one cborgate process serving `requests` GETs."""
    port = free_port()
    out = f"/tmp/cborgate-callgrind.{os.getpid()}.{port}"
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
         "--toggle-collect=*ReadTimeout*process_new*", binary, "serve",
         "--mode", "legacy", "--upstream", f"http://127.0.0.1:{up_port}",
         "--listen", f"127.0.0.1:{port}", "--admin", "127.0.0.1:0", "--log-level", "warn"],
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
                sys.exit("cborgate did not start under valgrind")
            time.sleep(0.1)
    request = (
        f"GET /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: bench\r\nAccept: {accept}\r\n\r\n"
    ).encode()
    pending = b""
    for _ in range(requests):
        conn.sendall(request)
        pending = read_response(conn, pending)
    conn.close()
    proc.terminate()
    proc.wait()
    total = 0
    for path in glob.glob(out + "*"):
        with open(path) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    total += int(line.split()[1])
                    break
        os.remove(path)
    return total


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("body", help="the JSON the upstream answers with")
    parser.add_argument("-n", "--requests", type=int, default=1000)
    parser.add_argument("--cborgate", default="target/release/cborgate")
    o = parser.parse_args()
    with open(o.body, "rb") as f:
        body = f.read()
    up_port = upstream(body)
    per = {}
    for name, accept in (("passthrough", "application/json"), ("transcoding", "application/cbor")):
        base = instructions(o.cborgate, up_port, accept, WARM)
        full = instructions(o.cborgate, up_port, accept, WARM + o.requests)
        per[name] = (full - base) / o.requests
        print(f"{name}: {per[name]:,.0f} instructions per request "
              f"({per[name] / len(body):.1f} per body byte)")
    print(f"transcoding / passthrough: {per['transcoding'] / per['passthrough']:.2f}x; "
          f"difference {per['transcoding'] - per['passthrough']:,.0f} per request "
          f"for {len(body):,} bytes of JSON")


if __name__ == "__main__":
    main()
