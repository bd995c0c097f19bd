# gen.py N SIZE NAME_PREFIX > list.json : a v1 List of N ConfigMaps of about SIZE bytes of data each
import json, random, sys
n, size, prefix = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
rnd = random.Random(28)
words = ("replicas image tag registry timeout retries endpoint cache level debug info warn "
         "region zone cluster node pod service port protocol tcp udp http https path host "
         "true false enabled disabled memory cpu limit request weight label selector").split()
items = []
for i in range(n):
    data, total, k = {}, 0, 0
    while total < size:
        line = " ".join(rnd.choice(words) for _ in range(rnd.randint(3, 8)))
        val = f"{line} {rnd.randint(0, 99999)}"
        key = f"key-{k:03d}"
        data[key] = val
        total += len(key) + len(val) + 6
        k += 1
    items.append({"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": f"{prefix}-{i:05d}", "labels": {"app": "gz", "idx": str(i)}},
                  "data": data})
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, sys.stdout)
