#!/usr/bin/env python3
"""Write seed inputs for the fuzz targets into fuzz/corpus/<target>/.

Seeds come from the shared captures (shared/corpus/objects/*/b.json,
b.cbor, b.cbor.2) and the RFC 8949 Appendix A vectors
(shared/vectors/appendix_a.json). json_to_cbor and cbor_to_json inputs
start with two control bytes (flags, chunking; see the targets), so each seed
is written with a few different control bytes. watch_streams is structured
and starts from an empty corpus.

Usage: fuzz/seed-corpus.py [SHARED_DIR]   (default: shared/ beside the repository)
"""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared")

# (flags, chunking) pairs: whole-ish default run, byte-at-a-time with a tiny
# window / length known, varied piece sizes with the other options.
CONTROL = [(0x00, 0x0E), (0x02, 0x00), (0x1C, 0x87)]


def write(target, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def seeds(target, payload, watch=False):
    for flags, chunking in CONTROL:
        if watch:
            flags |= 1
        write(target, bytes([flags, chunking]) + payload)


def main():
    n = 0
    objects = os.path.join(SHARED, "corpus", "objects")
    for name in sorted(os.listdir(objects)):
        watch = name.startswith("watch")
        base = os.path.join(objects, name)
        p = os.path.join(base, "b.json")
        if os.path.exists(p):
            seeds("json_to_cbor", open(p, "rb").read(), watch)
            n += 1
        for c in ("b.cbor", "b.cbor.2"):
            p = os.path.join(base, c)
            if os.path.exists(p):
                seeds("cbor_to_json", open(p, "rb").read(), watch)
                n += 1
    for v in json.load(open(os.path.join(SHARED, "vectors", "appendix_a.json"))):
        seeds("cbor_to_json", bytes.fromhex(v["hex"]))
        n += 1
        if "decoded" in v:
            seeds("json_to_cbor", json.dumps(v["decoded"]).encode())
            n += 1
    # A few hand-written JSON edge cases.
    for s in [b'{"a":1,"a":2}', b'"\\ud800\\udc00\\ud800x"', b"-0.0e-0", b"[[[[]]]]",
              b'{"type":"ADDED","object":{"kind":"Pod"}}\n{"type":"DELETED","object":{}}']:
        seeds("json_to_cbor", s, s.startswith(b'{"type"'))
        n += 1
    print(f"wrote {n} seeds (x{len(CONTROL)} control variants) under {HERE}/corpus")


if __name__ == "__main__":
    main()
