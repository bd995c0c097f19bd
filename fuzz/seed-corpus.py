#!/usr/bin/env python3
"""Write seed inputs for the fuzz targets into fuzz/corpus/<target>/.

Seeds come from the repository's recorded captures (tests/data/corpus/objects/*/b.json,
b.cbor, b.cbor.2) and the RFC 8949 Appendix A vectors
(tests/data/vectors/appendix_a.json). json_to_cbor and cbor_to_json inputs
start with two control bytes (flags, chunking; see the targets), so each seed
is written with a few different control bytes. watch_streams is structured
and starts from an empty corpus. negotiation gets hand-written request heads
(`[flags, method \n path \n query \n accept \n content-type]`, see the
target); it needs no data directory.

Usage: fuzz/seed-corpus.py [DATA_DIR]   (default: the repository's tests/data)
"""
import hashlib
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "tests", "data")

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


# Request heads for the negotiation target: (method, path, query, accept,
# content-type, upgrade). None is an absent query / header.
CLIENT_GO_CBOR = "application/cbor;q=1,application/json;q=0.9"
HEADS = [
    ("GET", "/api/v1/namespaces/default/pods", None, "application/json", None, False),
    ("GET", "/api/v1/namespaces/default/pods", None, "application/cbor", None, False),
    ("GET", "/api/v1/namespaces/default/pods/x", None, "application/json;q=0.9,application/cbor;q=1", None, False),
    ("GET", "/api/v1/namespaces/default/pods/x", None, CLIENT_GO_CBOR, None, False),
    ("GET", "/api/v1/pods", "limit=500", "application/cbor, */*", None, False),
    ("GET", "/api/v1/namespaces/default/configmaps", None, "application/json;as=Table;v=v1;g=meta.k8s.io,application/json", None, False),
    ("GET", "/apis/apps/v1/deployments", "labelSelector=app%3Dweb", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", None, False),
    ("GET", "/apis/apps/v1/deployments", None, "application/cbor;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json", None, False),
    ("GET", "/apis/apps/v1/namespaces/ns/deployments/web/scale", None, "application/cbor;as=Table;v=v1;g=meta.k8s.io", None, False),
    ("GET", "/api/v1/namespaces/default/pods", "watch=true&resourceVersion=1", "application/cbor", None, False),
    ("GET", "/api/v1/namespaces/default/pods", "watch=1&resourceVersion=1&allowWatchBookmarks=true", "application/cbor;stream=watch", None, False),
    ("GET", "/api/v1/watch/namespaces/default/pods", "resourceVersion=0", "application/cbor, application/json", None, False),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases", "watch=false&watch=true", "application/vnd.kubernetes.protobuf, */*", None, False),
    ("GET", "/api/v1/namespaces/default/pods/x", "watch=true", "application/cbor;pretty=1", None, False),
    ("GET", "/api/v1/namespaces/default/pods/x/log", "follow=true", "*/*", None, False),
    ("POST", "/api/v1/namespaces/default/pods/x/exec", "command=sh&stdin=true&tty=true", None, None, True),
    ("GET", "/api/v1/namespaces/default/pods/x/exec", "command=ls", "application/cbor", None, True),
    ("GET", "/api/v1/namespaces/default/pods/x/portforward", None, None, None, True),
    ("GET", "/api/v1/namespaces/default/services/https:web:443/proxy/healthz", None, "application/cbor", None, False),
    ("POST", "/api/v1/namespaces/default/configmaps", None, CLIENT_GO_CBOR, "application/cbor", False),
    ("POST", "/api/v1/namespaces/default/configmaps", "fieldManager=kubectl", "application/cbor", "application/json", False),
    ("POST", "/api/v1/namespaces/default/configmaps", None, "application/cbor", "application/cbor;charset=utf-8", False),
    ("POST", "/api/v1/namespaces/default/configmaps", None, "application/json", "application/merge-patch+cbor", False),
    ("PUT", "/apis/apps/v1/namespaces/ns/deployments/web", None, "application/cbor", "APPLICATION/CBOR", False),
    ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/web", "fieldManager=kubectl&force=true", CLIENT_GO_CBOR, "application/apply-patch+cbor", False),
    ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/web", "fieldManager=kubectl", "application/json", "application/apply-patch+yaml", False),
    ("PATCH", "/apis/apps/v1/namespaces/ns/deployments/web/status", None, "application/cbor", "application/merge-patch+json", False),
    ("PATCH", "/api/v1/namespaces/default/configmaps/cm", None, "application/cbor", "application/cbor", False),
    ("PATCH", "/api/v1/namespaces/default/configmaps/cm", None, "application/cbor", "Application/Apply-Patch+CBOR", False),
    ("DELETE", "/api/v1/namespaces/default/pods/x", "gracePeriodSeconds=0", "application/cbor", "application/cbor", False),
    ("DELETE", "/api/v1/namespaces/default/pods", "labelSelector=a", "application/json, */*", None, False),
    ("GET", "/api/v1", None, "application/cbor", None, False),
    ("GET", "/apis/apps/v1", None, "application/cbor;as=Table;v=v1;g=meta.k8s.io", None, False),
    ("GET", "/api", None, "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json", None, False),
    ("GET", "/apis", None, "application/cbor", None, False),
    ("GET", "/apis/apps", None, "application/yaml", None, False),
    ("GET", "/version", None, "application/json, */*", None, False),
    ("GET", "/openapi/v3/apis/apps/v1", "hash=abc", "application/com.github.proto-openapi.spec.v3@v1.0+protobuf", None, False),
    ("GET", "/healthz", "verbose", None, None, False),
    ("HEAD", "/api/v1/namespaces/default/pods", None, "application/cbor", None, False),
    ("OPTIONS", "/api/v1/namespaces/default/pods", None, "application/cbor", None, False),
    ("get", "/api/v1/namespaces/default/pods%2Fx", "pretty=true", "application/json;pretty=1", None, False),
    ("GET", "/api/v1/namespaces/default/pods", "pretty=1", "application/cbor;q=0, text/html;q=0.5", None, False),
    ("GET", "/api/v1/namespaces/default/pods", None, "application/json;q=0x1p-1, application/cbor;q=0.5e0, application/yaml;q=1_0e-1", None, False),
    ("GET", "/api/v1/namespaces/default/pods", None, "text/plain", None, False),
    ("GET", "/api/v1/namespaces/default/pods", None, "", None, False),
    ("GET", "/api/v1/namespaces/default/pods", None, "application/cbor;sv=v1;stream=watch;profile=x;export=1", None, False),
    ("GET", "/api/v1/namespaces/default/pods", None, ",".join(["a/b;q=0.%d" % (i % 10) for i in range(20)] + ["*/*", "application/*;q=0.5"]), None, False),
]


def head_seed(method, path, query, accept, content_type, upgrade):
    flags = (1 if upgrade else 0) | (2 if query is None else 0) | (4 if accept is None else 0) | (8 if content_type is None else 0)
    fields = [method, path, query or "", accept or "", content_type or ""]
    return bytes([flags]) + "\n".join(fields).encode()


def main():
    for head in HEADS:
        write("negotiation", head_seed(*head))
    print(f"wrote {len(HEADS)} negotiation seeds")
    if not os.path.isdir(DATA):
        print(f"{DATA} not found: no codec seeds", file=sys.stderr)
        return
    n = 0
    objects = os.path.join(DATA, "corpus", "objects")
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
    for v in json.load(open(os.path.join(DATA, "vectors", "appendix_a.json"))):
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
