//! Deterministic generator of realistic Kubernetes pod lists and pod watch
//! streams, shaped like what a (legacy, JSON-only) kube-apiserver sends:
//! compact JSON, Go's field order, Go's string escaping (`<`, `>`, `&`,
//! U+2028/U+2029 as `\uXXXX`), a trailing newline after each body / event.
//!
//! Each pod looks like a Deployment-managed pod on a real cluster (compare
//! `tests/data/corpus/objects/podlist-100/b.json`, which this extends): metadata
//! with labels, annotations (including a CNI network-status annotation whose
//! value is escaped JSON), ownerReferences and two managedFields entries;
//! spec with volumes, 1–3 containers (command, args, ports, env with literal
//! and `valueFrom` entries, resources, volume mounts, probes, security
//! context), tolerations and scheduling fields; status with conditions, IPs
//! and containerStatuses. Names, UIDs, IPs, counts and timestamps vary per
//! pod; a few pods carry non-ASCII annotation text.
//!
//! The output depends only on the pod count (and, for watch streams, the event
//! count): the random source is a fixed-seed SplitMix64.

/// SplitMix64: tiny, fast, deterministic.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
    fn hex(&mut self, n: usize) -> String {
        const H: &[u8; 16] = b"0123456789abcdef";
        (0..n).map(|_| H[self.below(16) as usize] as char).collect()
    }
    fn alnum(&mut self, n: usize) -> String {
        // The alphabet of Kubernetes' generated name suffixes.
        const A: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..n)
            .map(|_| A[self.below(A.len() as u64) as usize] as char)
            .collect()
    }
    fn uid(&mut self) -> String {
        format!(
            "{}-{}-4{}-{}{}-{}",
            self.hex(8),
            self.hex(4),
            self.hex(3),
            ["8", "9", "a", "b"][self.below(4) as usize],
            self.hex(3),
            self.hex(12)
        )
    }
}

/// A compact JSON writer with Go's escaping and automatic commas.
pub struct W {
    pub out: Vec<u8>,
    /// One entry per open container: has it got an element yet?
    first: Vec<bool>,
    after_key: bool,
}

impl W {
    pub fn new() -> Self {
        W {
            out: Vec::new(),
            first: Vec::new(),
            after_key: false,
        }
    }
    fn sep(&mut self) {
        if self.after_key {
            self.after_key = false;
            return;
        }
        if let Some(f) = self.first.last_mut() {
            if !*f {
                self.out.push(b',');
            }
            *f = false;
        }
    }
    fn raw_str(&mut self, s: &str) {
        self.out.push(b'"');
        for c in s.chars() {
            match c {
                '"' => self.out.extend_from_slice(b"\\\""),
                '\\' => self.out.extend_from_slice(b"\\\\"),
                '\n' => self.out.extend_from_slice(b"\\n"),
                '\r' => self.out.extend_from_slice(b"\\r"),
                '\t' => self.out.extend_from_slice(b"\\t"),
                '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                    self.out
                        .extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
                }
                c if (c as u32) < 0x20 => {
                    self.out
                        .extend_from_slice(format!("\\u{:04x}", c as u32).as_bytes());
                }
                c => {
                    let mut b = [0u8; 4];
                    self.out.extend_from_slice(c.encode_utf8(&mut b).as_bytes());
                }
            }
        }
        self.out.push(b'"');
    }
    pub fn key(&mut self, k: &str) {
        self.sep();
        self.raw_str(k);
        self.out.push(b':');
        self.after_key = true;
    }
    pub fn str(&mut self, s: &str) {
        self.sep();
        self.raw_str(s);
    }
    pub fn int(&mut self, v: i64) {
        self.sep();
        self.out.extend_from_slice(v.to_string().as_bytes());
    }
    pub fn bool(&mut self, v: bool) {
        self.sep();
        self.out
            .extend_from_slice(if v { b"true" as &[u8] } else { b"false" });
    }
    pub fn null(&mut self) {
        self.sep();
        self.out.extend_from_slice(b"null");
    }
    pub fn obj(&mut self, f: impl FnOnce(&mut W)) {
        self.sep();
        self.out.push(b'{');
        self.first.push(true);
        f(self);
        self.first.pop();
        self.out.push(b'}');
    }
    pub fn arr(&mut self, f: impl FnOnce(&mut W)) {
        self.sep();
        self.out.push(b'[');
        self.first.push(true);
        f(self);
        self.first.pop();
        self.out.push(b']');
    }
    // Shorthands for "key": value.
    pub fn ks(&mut self, k: &str, v: &str) {
        self.key(k);
        self.str(v);
    }
    pub fn ki(&mut self, k: &str, v: i64) {
        self.key(k);
        self.int(v);
    }
    pub fn kb(&mut self, k: &str, v: bool) {
        self.key(k);
        self.bool(v);
    }
    pub fn ko(&mut self, k: &str, f: impl FnOnce(&mut W)) {
        self.key(k);
        self.obj(f);
    }
    pub fn ka(&mut self, k: &str, f: impl FnOnce(&mut W)) {
        self.key(k);
        self.arr(f);
    }
    /// `"k": {}` — managedFields' leaf marker.
    pub fn leaf(&mut self, k: &str) {
        self.ko(k, |_| {});
    }
}

fn time(rng_secs: u64) -> String {
    // 2026-11-21T00:00:00Z plus up to a day.
    let s = rng_secs % 86_400;
    format!(
        "2026-11-21T{:02}:{:02}:{:02}Z",
        s / 3600,
        (s / 60) % 60,
        s % 60
    )
}

const APPS: &[&str] = &[
    "frontend",
    "checkout",
    "payments",
    "catalog",
    "search-indexer",
    "recommendation-engine",
    "auth",
    "inventory",
];
const IMAGES: &[&str] = &[
    "quay.io/acme/frontend",
    "registry.k8s.io/pause",
    "docker.io/library/nginx",
    "ghcr.io/acme/payments-api",
    "quay.io/prometheus/node-exporter",
    "gcr.io/acme-prod/catalog-service",
];
const NODES: &[&str] = &[
    "ip-10-0-131-17.eu-west-1.compute.internal",
    "ip-10-0-142-201.eu-west-1.compute.internal",
    "ip-10-0-157-9.eu-west-1.compute.internal",
    "ip-10-0-166-88.eu-west-1.compute.internal",
];

/// One pod. `with_type_meta`: watch events carry `kind`/`apiVersion`, list
/// items do not.
pub fn pod(w: &mut W, rng: &mut Rng, idx: u64, with_type_meta: bool) {
    let app = rng.pick(APPS);
    let hash = rng.alnum(10);
    let rs = format!("{app}-{hash}");
    let name = format!("{rs}-{}", rng.alnum(5));
    let ns = format!(
        "team-{}",
        ["alpha", "beta", "gamma", "delta"][(idx % 4) as usize]
    );
    let created = 3_600 + rng.below(40_000);
    let started = created + 1 + rng.below(20);
    let pod_ip = format!(
        "10.{}.{}.{}",
        128 + rng.below(4),
        rng.below(256),
        2 + rng.below(250)
    );
    let host_ip = format!("10.0.{}.{}", 128 + rng.below(64), 2 + rng.below(250));
    let node = rng.pick(NODES);
    let n_containers = 1 + (rng.below(10) / 6) + (rng.below(10) / 9); // mostly 1, some 2-3
    let containers: Vec<(String, String, i64)> = (0..n_containers)
        .map(|c| {
            let cname = if c == 0 {
                app.to_string()
            } else {
                ["istio-proxy", "log-shipper"][(c - 1) as usize].to_string()
            };
            let image = format!(
                "{}:v{}.{}.{}",
                rng.pick(IMAGES),
                1 + rng.below(3),
                rng.below(30),
                rng.below(10)
            );
            (cname, image, 8000 + rng.below(1000) as i64)
        })
        .collect();
    let token_vol = format!("kube-api-access-{}", rng.alnum(5));
    let uid = rng.uid();
    let owner_uid = rng.uid();
    let rv = 100_000 + idx * 7 + rng.below(7);

    w.obj(|w| {
        if with_type_meta {
            w.ks("kind", "Pod");
            w.ks("apiVersion", "v1");
        }
        w.ko("metadata", |w| {
            w.ks("name", &name);
            w.ks("generateName", &format!("{rs}-"));
            w.ks("namespace", &ns);
            w.ks("uid", &uid);
            w.ks("resourceVersion", &rv.to_string());
            w.ks("creationTimestamp", &time(created));
            w.ko("labels", |w| {
                w.ks("app", app);
                w.ks("app.kubernetes.io/name", app);
                w.ks("app.kubernetes.io/part-of", "shop");
                w.ks("pod-template-hash", &hash);
                w.ks("tier", ["web", "api", "backend"][(idx % 3) as usize]);
                w.ks("version", &format!("v{}", 1 + idx % 5));
            });
            w.ko("annotations", |w| {
                let mac = format!(
                    "0a:58:0a:{:02x}:{:02x}:{:02x}",
                    rng.below(256),
                    rng.below(256),
                    rng.below(256)
                );
                // Multi-line JSON inside a string: many escapes, as on OpenShift.
                w.ks(
                    "k8s.v1.cni.cncf.io/network-status",
                    &format!(
                        "[{{\n    \"name\": \"ovn-kubernetes\",\n    \"interface\": \"eth0\",\n    \"ips\": [\n        \"{pod_ip}\"\n    ],\n    \"mac\": \"{mac}\",\n    \"default\": true,\n    \"dns\": {{}}\n}}]"
                    ),
                );
                w.ks("openshift.io/scc", "restricted-v2");
                w.ks("prometheus.io/path", "/metrics");
                w.ks("prometheus.io/port", &(9000 + idx % 100).to_string());
                w.ks("prometheus.io/scrape", "true");
                w.ks("seccomp.security.alpha.kubernetes.io/pod", "runtime/default");
                if idx.is_multiple_of(7) {
                    w.ks(
                        "acme.example.com/runbook",
                        &format!("https://wiki.example.com/runbooks?app={app}&env=prod&id={idx}"),
                    );
                }
                if idx % 10 == 3 {
                    w.ks(
                        "acme.example.com/description",
                        "Équipe « vitrine » — service de présentation 🛒, propriétaire: Zoë",
                    );
                }
            });
            w.ka("ownerReferences", |w| {
                w.obj(|w| {
                    w.ks("apiVersion", "apps/v1");
                    w.ks("kind", "ReplicaSet");
                    w.ks("name", &rs);
                    w.ks("uid", &owner_uid);
                    w.kb("controller", true);
                    w.kb("blockOwnerDeletion", true);
                });
            });
            w.ka("managedFields", |w| {
                w.obj(|w| {
                    w.ks("manager", "kube-controller-manager");
                    w.ks("operation", "Update");
                    w.ks("apiVersion", "v1");
                    w.ks("time", &time(created));
                    w.ks("fieldsType", "FieldsV1");
                    w.ko("fieldsV1", |w| {
                        w.ko("f:metadata", |w| {
                            w.ko("f:generateName", |_| {});
                            w.ko("f:labels", |w| {
                                w.leaf(".");
                                for l in [
                                    "f:app",
                                    "f:app.kubernetes.io/name",
                                    "f:app.kubernetes.io/part-of",
                                    "f:pod-template-hash",
                                    "f:tier",
                                    "f:version",
                                ] {
                                    w.leaf(l);
                                }
                            });
                            w.ko("f:ownerReferences", |w| {
                                w.leaf(".");
                                w.leaf(&format!("k:{{\"uid\":\"{owner_uid}\"}}"));
                            });
                        });
                        w.ko("f:spec", |w| {
                            w.ko("f:containers", |w| {
                                for (cname, _, _) in &containers {
                                    w.ko(&format!("k:{{\"name\":\"{cname}\"}}"), |w| {
                                        w.leaf(".");
                                        for f in ["f:args", "f:command", "f:env", "f:image"] {
                                            w.leaf(f);
                                        }
                                        w.leaf("f:imagePullPolicy");
                                        w.leaf("f:livenessProbe");
                                        w.leaf("f:name");
                                        w.leaf("f:ports");
                                        w.leaf("f:readinessProbe");
                                        w.ko("f:resources", |w| {
                                            w.leaf(".");
                                            w.ko("f:limits", |w| {
                                                w.leaf(".");
                                                w.leaf("f:cpu");
                                                w.leaf("f:memory");
                                            });
                                            w.ko("f:requests", |w| {
                                                w.leaf(".");
                                                w.leaf("f:cpu");
                                                w.leaf("f:memory");
                                            });
                                        });
                                        w.leaf("f:securityContext");
                                        w.leaf("f:terminationMessagePath");
                                        w.leaf("f:terminationMessagePolicy");
                                        w.leaf("f:volumeMounts");
                                    });
                                }
                            });
                            for f in [
                                "f:dnsPolicy",
                                "f:enableServiceLinks",
                                "f:imagePullSecrets",
                                "f:restartPolicy",
                                "f:schedulerName",
                                "f:securityContext",
                                "f:serviceAccount",
                                "f:serviceAccountName",
                                "f:terminationGracePeriodSeconds",
                                "f:volumes",
                            ] {
                                w.leaf(f);
                            }
                        });
                    });
                });
                w.obj(|w| {
                    w.ks("manager", "kubelet");
                    w.ks("operation", "Update");
                    w.ks("apiVersion", "v1");
                    w.ks("time", &time(started + 5));
                    w.ks("fieldsType", "FieldsV1");
                    w.ko("fieldsV1", |w| {
                        w.ko("f:status", |w| {
                            w.ko("f:conditions", |w| {
                                for t in [
                                    "ContainersReady",
                                    "Initialized",
                                    "PodReadyToStartContainers",
                                    "Ready",
                                ] {
                                    w.ko(&format!("k:{{\"type\":\"{t}\"}}"), |w| {
                                        w.leaf(".");
                                        w.leaf("f:lastProbeTime");
                                        w.leaf("f:lastTransitionTime");
                                        w.leaf("f:status");
                                        w.leaf("f:type");
                                    });
                                }
                            });
                            for f in [
                                "f:containerStatuses",
                                "f:hostIP",
                                "f:hostIPs",
                                "f:phase",
                                "f:podIP",
                                "f:podIPs",
                                "f:startTime",
                            ] {
                                w.leaf(f);
                            }
                        });
                    });
                    w.ks("subresource", "status");
                });
            });
        });
        w.ko("spec", |w| {
            w.ka("volumes", |w| {
                w.obj(|w| {
                    w.ks("name", "config");
                    w.ko("configMap", |w| {
                        w.ks("name", &format!("{app}-config"));
                        w.ki("defaultMode", 420);
                    });
                });
                w.obj(|w| {
                    w.ks("name", "tmp");
                    w.ko("emptyDir", |w| {
                        w.ks("sizeLimit", "512Mi");
                    });
                });
                w.obj(|w| {
                    w.ks("name", &token_vol);
                    w.ko("projected", |w| {
                        w.ka("sources", |w| {
                            w.obj(|w| {
                                w.ko("serviceAccountToken", |w| {
                                    w.ki("expirationSeconds", 3607);
                                    w.ks("path", "token");
                                });
                            });
                            w.obj(|w| {
                                w.ko("configMap", |w| {
                                    w.ks("name", "kube-root-ca.crt");
                                    w.ka("items", |w| {
                                        w.obj(|w| {
                                            w.ks("key", "ca.crt");
                                            w.ks("path", "ca.crt");
                                        });
                                    });
                                });
                            });
                            w.obj(|w| {
                                w.ko("downwardAPI", |w| {
                                    w.ka("items", |w| {
                                        w.obj(|w| {
                                            w.ks("path", "namespace");
                                            w.ko("fieldRef", |w| {
                                                w.ks("apiVersion", "v1");
                                                w.ks("fieldPath", "metadata.namespace");
                                            });
                                        });
                                    });
                                });
                            });
                        });
                        w.ki("defaultMode", 420);
                    });
                });
            });
            w.ka("containers", |w| {
                for (cname, image, port) in &containers {
                    w.obj(|w| {
                        w.ks("name", cname);
                        w.ks("image", image);
                        w.ka("command", |w| {
                            w.str(&format!("/usr/local/bin/{cname}"));
                        });
                        w.ka("args", |w| {
                            w.str(&format!("--port={port}"));
                            w.str("--log-level=info");
                            w.str(&format!("--workers={}", 1 + rng.below(16)));
                            w.str("--config=/etc/app/config.yaml");
                        });
                        w.ka("ports", |w| {
                            w.obj(|w| {
                                w.ks("name", "http");
                                w.ki("containerPort", *port);
                                w.ks("protocol", "TCP");
                            });
                            w.obj(|w| {
                                w.ks("name", "metrics");
                                w.ki("containerPort", 9090);
                                w.ks("protocol", "TCP");
                            });
                        });
                        w.ka("env", |w| {
                            for (k, v) in [
                                ("LOG_FORMAT", "json".to_string()),
                                ("GOMAXPROCS", (1 + rng.below(8)).to_string()),
                                (
                                    "DATABASE_URL",
                                    format!("postgres://{app}@db-{}.internal:5432/{app}", idx % 3),
                                ),
                                ("FEATURE_FLAGS", "checkout-v2,fast-search,<beta>".to_string()),
                            ] {
                                w.obj(|w| {
                                    w.ks("name", k);
                                    w.ks("value", &v);
                                });
                            }
                            for (k, path) in [
                                ("POD_NAME", "metadata.name"),
                                ("POD_NAMESPACE", "metadata.namespace"),
                                ("POD_IP", "status.podIP"),
                            ] {
                                w.obj(|w| {
                                    w.ks("name", k);
                                    w.ko("valueFrom", |w| {
                                        w.ko("fieldRef", |w| {
                                            w.ks("apiVersion", "v1");
                                            w.ks("fieldPath", path);
                                        });
                                    });
                                });
                            }
                        });
                        w.ko("resources", |w| {
                            let cpu = 50 * (1 + rng.below(20));
                            let mem = 64 * (1 + rng.below(32));
                            w.ko("limits", |w| {
                                w.ks("cpu", &format!("{}m", cpu * 2));
                                w.ks("memory", &format!("{}Mi", mem * 2));
                            });
                            w.ko("requests", |w| {
                                w.ks("cpu", &format!("{cpu}m"));
                                w.ks("memory", &format!("{mem}Mi"));
                            });
                        });
                        w.ka("volumeMounts", |w| {
                            w.obj(|w| {
                                w.ks("name", "config");
                                w.kb("readOnly", true);
                                w.ks("mountPath", "/etc/app");
                            });
                            w.obj(|w| {
                                w.ks("name", "tmp");
                                w.ks("mountPath", "/tmp");
                            });
                            w.obj(|w| {
                                w.ks("name", &token_vol);
                                w.kb("readOnly", true);
                                w.ks("mountPath", "/var/run/secrets/kubernetes.io/serviceaccount");
                            });
                        });
                        for probe in ["livenessProbe", "readinessProbe"] {
                            w.ko(probe, |w| {
                                w.ko("httpGet", |w| {
                                    w.ks(
                                        "path",
                                        if probe == "livenessProbe" { "/healthz" } else { "/readyz" },
                                    );
                                    w.ki("port", *port);
                                    w.ks("scheme", "HTTP");
                                });
                                w.ki("initialDelaySeconds", 5 + rng.below(10) as i64);
                                w.ki("timeoutSeconds", 1);
                                w.ki("periodSeconds", 10);
                                w.ki("successThreshold", 1);
                                w.ki("failureThreshold", 3);
                            });
                        }
                        w.ks("terminationMessagePath", "/dev/termination-log");
                        w.ks("terminationMessagePolicy", "File");
                        w.ks("imagePullPolicy", "IfNotPresent");
                        w.ko("securityContext", |w| {
                            w.ko("capabilities", |w| {
                                w.ka("drop", |w| w.str("ALL"));
                            });
                            w.ki("runAsUser", 1_000_680_000 + rng.below(10_000) as i64);
                            w.kb("runAsNonRoot", true);
                            w.kb("allowPrivilegeEscalation", false);
                        });
                    });
                }
            });
            w.ks("restartPolicy", "Always");
            w.ki("terminationGracePeriodSeconds", 30);
            w.ks("dnsPolicy", "ClusterFirst");
            w.ks("serviceAccountName", app);
            w.ks("serviceAccount", app);
            w.ks("nodeName", node);
            w.ko("securityContext", |w| {
                w.ko("seLinuxOptions", |w| {
                    w.ks("level", &format!("s0:c{},c{}", 10 + idx % 20, 5 + idx % 5));
                });
                w.ki("fsGroup", 1_000_680_000);
                w.ko("seccompProfile", |w| w.ks("type", "RuntimeDefault"));
            });
            w.ka("imagePullSecrets", |w| {
                w.obj(|w| w.ks("name", &format!("{app}-dockercfg-{}", rng.alnum(5))));
            });
            w.ks("schedulerName", "default-scheduler");
            w.ka("tolerations", |w| {
                for k in ["node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"] {
                    w.obj(|w| {
                        w.ks("key", k);
                        w.ks("operator", "Exists");
                        w.ks("effect", "NoExecute");
                        w.ki("tolerationSeconds", 300);
                    });
                }
                if idx.is_multiple_of(5) {
                    w.obj(|w| {
                        w.ks("key", "node.kubernetes.io/memory-pressure");
                        w.ks("operator", "Exists");
                        w.ks("effect", "NoSchedule");
                    });
                }
            });
            w.ki("priority", 0);
            w.kb("enableServiceLinks", true);
            w.ks("preemptionPolicy", "PreemptLowerPriority");
        });
        w.ko("status", |w| {
            w.ks("phase", "Running");
            w.ka("conditions", |w| {
                for (t, dt) in [
                    ("PodReadyToStartContainers", 2),
                    ("Initialized", 0),
                    ("Ready", 4),
                    ("ContainersReady", 4),
                    ("PodScheduled", 0),
                ] {
                    w.obj(|w| {
                        w.ks("type", t);
                        w.ks("status", "True");
                        w.key("lastProbeTime");
                        w.null();
                        w.ks("lastTransitionTime", &time(started + dt));
                    });
                }
            });
            w.ks("hostIP", &host_ip);
            w.ka("hostIPs", |w| w.obj(|w| w.ks("ip", &host_ip)));
            w.ks("podIP", &pod_ip);
            w.ka("podIPs", |w| w.obj(|w| w.ks("ip", &pod_ip)));
            w.ks("startTime", &time(started));
            w.ka("containerStatuses", |w| {
                for (cname, image, _) in &containers {
                    let restarts = if rng.below(10) == 0 { rng.below(5) as i64 } else { 0 };
                    w.obj(|w| {
                        w.ks("name", cname);
                        w.ko("state", |w| {
                            w.ko("running", |w| w.ks("startedAt", &time(started + 3)));
                        });
                        w.ko("lastState", |_| {});
                        w.kb("ready", true);
                        w.ki("restartCount", restarts);
                        w.ks("image", image);
                        w.ks("imageID", &format!("{image}@sha256:{}", rng.hex(64)));
                        w.ks("containerID", &format!("cri-o://{}", rng.hex(64)));
                        w.kb("started", true);
                    });
                }
            });
            w.ks("qosClass", "Burstable");
        });
    });
}

/// A `PodList` body of `n` pods, as `GET /api/v1/pods` returns it.
pub fn pod_list(n: usize) -> Vec<u8> {
    let mut rng = Rng::new(0xC0DE_C0DE ^ n as u64);
    let mut w = W::new();
    w.obj(|w| {
        w.ks("kind", "PodList");
        w.ks("apiVersion", "v1");
        w.ko("metadata", |w| {
            w.ks(
                "resourceVersion",
                &(100_000 + 7 * n as u64 + 11).to_string(),
            );
        });
        w.ka("items", |w| {
            for i in 0..n {
                pod(w, &mut rng, i as u64, false);
            }
        });
    });
    w.out.push(b'\n');
    w.out
}

/// A watch stream of `n` events, one JSON event per line: mostly `MODIFIED`,
/// some `ADDED`, and a `BOOKMARK` every 100 events.
pub fn watch_stream(n: usize) -> Vec<u8> {
    let mut rng = Rng::new(0x5EED_0000 ^ n as u64);
    let mut out = Vec::new();
    for i in 0..n {
        let mut w = W::new();
        let kind = if i % 100 == 99 {
            "BOOKMARK"
        } else if rng.below(4) == 0 {
            "ADDED"
        } else {
            "MODIFIED"
        };
        w.obj(|w| {
            w.ks("type", kind);
            w.key("object");
            if kind == "BOOKMARK" {
                w.obj(|w| {
                    w.ks("kind", "Pod");
                    w.ks("apiVersion", "v1");
                    w.ko("metadata", |w| {
                        w.ks("resourceVersion", &(200_000 + i as u64 * 3).to_string());
                        if i == 99 {
                            w.ko("annotations", |w| {
                                w.ks("k8s.io/initial-events-end", "true");
                            });
                        }
                    });
                });
            } else {
                pod(w, &mut rng, i as u64, true);
            }
        });
        out.extend_from_slice(&w.out);
        out.push(b'\n');
    }
    out
}
