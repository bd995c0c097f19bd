//! A real control plane on loopback, laid out as `deploy/README.md` tells operators
//! to: etcd; kube-apiserver on a loopback port with kubeadm's flags for client
//! certificates and the request-header (front-proxy) protocol; cborgate in front
//! of it serving TLS, verifying clients against the cluster CA and naming them
//! upstream with its front-proxy certificate; kube-controller-manager and
//! kube-scheduler with x509 kubeconfigs, as kubeadm makes them, that point at
//! cborgate, with client-go's CBOR gates on.

use crate::http::{Client, Cred};
use crate::procs::{eventually, free_port, listening, poll, Proc};
use crate::support::pki::{Ca, Leaf};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where the binaries are: `KUBEBUILDER_ASSETS` (kube-apiserver, etcd, kubectl, as
/// envtest has them) and, for kube-controller-manager and kube-scheduler,
/// `CBORGATE_CONTROLLER_ASSETS` or else the same folder.
pub struct Assets {
    pub dir: PathBuf,
    pub controllers: PathBuf,
    /// The kube-apiserver binary: `dir`'s, or a pre-CBOR one's (`legacy`).
    pub apiserver: PathBuf,
    /// A pre-CBOR kube-apiserver (1.30): it has no `CBORServingAndStorage` gate at all
    /// (and refuses to start with the flag), and no controllers may run against it.
    pub legacy: bool,
    /// `kube-apiserver --version`'s number, for the summary (`1.36.2`).
    pub version: String,
}

pub const ASSETS_VAR: &str = "KUBEBUILDER_ASSETS";
pub const CONTROLLERS_VAR: &str = "CBORGATE_CONTROLLER_ASSETS";
/// A folder with a pre-CBOR kube-apiserver (1.30.3, `../shared/k8s-1.30` unpacked);
/// etcd and kubectl still come from `KUBEBUILDER_ASSETS`.
pub const LEGACY_VAR: &str = "CBORGATE_LEGACY_ASSETS";

/// The number `kube-apiserver --version` prints (`Kubernetes v1.36.2` → `1.36.2`).
fn apiserver_version(bin: &Path) -> String {
    let out = Command::new(bin)
        .arg("--version")
        .output()
        .unwrap_or_else(|e| panic!("{} --version: {e}", bin.display()));
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .trim_start_matches('v')
        .to_string()
}

impl Assets {
    /// The binaries, or why the suite cannot run.
    pub fn from_env() -> Result<Assets, String> {
        let dir = std::env::var_os(ASSETS_VAR)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .ok_or_else(|| format!("{ASSETS_VAR} is not set"))?;
        let controllers = std::env::var_os(CONTROLLERS_VAR)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| dir.clone());
        for (d, b) in [
            (&dir, "kube-apiserver"),
            (&dir, "etcd"),
            (&dir, "kubectl"),
            (&controllers, "kube-controller-manager"),
            (&controllers, "kube-scheduler"),
        ] {
            if !d.join(b).is_file() {
                return Err(format!("no {b} in {}", d.display()));
            }
        }
        let apiserver = dir.join("kube-apiserver");
        let version = apiserver_version(&apiserver);
        Ok(Assets {
            dir,
            controllers,
            apiserver,
            legacy: false,
            version,
        })
    }

    /// The same binaries with `LEGACY_VAR`'s kube-apiserver, if it is set (and why
    /// not, if it is set wrong).
    pub fn legacy(&self) -> Option<Result<Assets, String>> {
        let dir = std::env::var_os(LEGACY_VAR)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)?;
        let apiserver = dir.join("kube-apiserver");
        if !apiserver.is_file() {
            return Some(Err(format!("no kube-apiserver in {}", dir.display())));
        }
        let version = apiserver_version(&apiserver);
        Some(Ok(Assets {
            dir: self.dir.clone(),
            controllers: self.controllers.clone(),
            apiserver,
            legacy: true,
            version,
        }))
    }

    pub fn bin(&self, name: &str) -> PathBuf {
        match name {
            "kube-controller-manager" | "kube-scheduler" => self.controllers.join(name),
            "kube-apiserver" => self.apiserver.clone(),
            _ => self.dir.join(name),
        }
    }
}

/// The cluster's certificates, made as kubeadm makes them: a cluster CA that signs
/// the apiserver's serving certificate, cborgate's and every client's; a front-proxy
/// CA that signs the front-proxy client certificate.
pub struct Pki {
    pub dir: PathBuf,
    pub ca: Ca,
    pub front_proxy_ca: Ca,
    pub apiserver: Leaf,
    pub gate_serving: Leaf,
    pub front_proxy_client: Leaf,
    pub controller_manager: Leaf,
    pub scheduler: Leaf,
    pub admin: Leaf,
    /// The service-account signing key (ECDSA P-256, PKCS#8 PEM) and its public half.
    pub sa_key: PathBuf,
    pub sa_pub: PathBuf,
    /// A static token of a member of `system:masters` (`--token-auth-file`).
    pub admin_token: String,
    pub tokens: PathBuf,
}

/// An address outside 127.0.0.0/8 for the endpoint-reconciler layout (TEST-NET-1,
/// RFC 5737), only ever used inside a network namespace of the suite's own.
pub const NODE_IP: &str = "192.0.2.10";

impl Pki {
    pub fn new(dir: &Path) -> Pki {
        let dir = dir.join("pki");
        std::fs::create_dir_all(&dir).unwrap();
        let ca = Ca::new(&dir, "kubernetes-ca");
        let front_proxy_ca = Ca::new(&dir, "front-proxy-ca");
        let names = [
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
            "localhost",
            "127.0.0.1",
            "10.0.0.1",
            NODE_IP,
        ];
        let apiserver = ca.server_for("apiserver", "kube-apiserver", &names);
        let gate_serving = ca.server_for("cborgate", "kube-apiserver", &names);
        let front_proxy_client =
            front_proxy_ca.client("front-proxy-client", "front-proxy-client", &[]);
        let controller_manager =
            ca.client("controller-manager", "system:kube-controller-manager", &[]);
        let scheduler = ca.client("scheduler", "system:kube-scheduler", &[]);
        let admin = ca.client("admin", "kubernetes-admin", &["system:masters"]);
        let key = rcgen::KeyPair::generate().unwrap();
        let (sa_key, sa_pub) = (dir.join("sa.key"), dir.join("sa.pub"));
        std::fs::write(&sa_key, key.serialize_pem()).unwrap();
        std::fs::write(&sa_pub, key.public_key_pem()).unwrap();
        let admin_token = format!("{:032x}", rand_u128());
        let tokens = dir.join("tokens.csv");
        std::fs::write(
            &tokens,
            format!("{admin_token},token-admin,token-admin-uid,system:masters\n"),
        )
        .unwrap();
        Pki {
            dir,
            ca,
            front_proxy_ca,
            apiserver,
            gate_serving,
            front_proxy_client,
            controller_manager,
            scheduler,
            admin,
            sa_key,
            sa_pub,
            admin_token,
            tokens,
        }
    }
}

/// 128 bits from the kernel.
fn rand_u128() -> u128 {
    let mut b = [0u8; 16];
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut b)
        .unwrap();
    u128::from_le_bytes(b)
}

/// An argument list the processes own.
fn owned(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// A process and the command line that starts it again.
pub struct Service {
    pub proc: Option<Proc>,
    dir: PathBuf,
    name: String,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl Service {
    pub fn start(
        dir: &Path,
        name: &str,
        program: PathBuf,
        args: Vec<String>,
        env: &[(&str, &str)],
    ) -> Service {
        let mut svc = Service {
            proc: None,
            dir: dir.to_path_buf(),
            name: name.to_string(),
            program,
            args,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        svc.restart();
        svc
    }

    /// Start it (again): a stopped service comes back with the same command line.
    pub fn restart(&mut self) {
        self.stop();
        let env: Vec<(&str, &str)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        self.proc = Some(Proc::start(
            &self.dir,
            &self.name,
            &self.program,
            &self.args,
            &env,
        ));
    }

    /// SIGTERM and wait (up to 30 s); the exit code.
    pub fn stop(&mut self) -> Option<i32> {
        self.proc
            .take()
            .and_then(|mut p| p.terminate(Duration::from_secs(30)))
    }

    pub fn check_alive(&mut self) {
        self.proc.as_mut().expect("running").check_alive();
    }

    pub fn pid(&self) -> u32 {
        self.proc.as_ref().expect("running").pid()
    }

    /// Whether it was started and has exited since.
    pub fn exited(&mut self) -> bool {
        self.proc.as_mut().is_some_and(|p| p.exited())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn log(&self) -> PathBuf {
        self.dir.join(format!("{}.log", self.name))
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.log()).unwrap_or_default()
    }
}

/// etcd, one member on loopback.
pub fn etcd(assets: &Assets, dir: &Path, name: &str) -> (Service, String) {
    let (client, peer) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let data = dir.join(format!("{name}-data"));
    let mut svc = Service::start(
        dir,
        name,
        assets.bin("etcd"),
        vec![
            "--name=default".into(),
            format!("--data-dir={}", s(&data)),
            "--unsafe-no-fsync".into(),
            "--log-level=warn".into(),
            format!("--listen-client-urls={url}"),
            format!("--advertise-client-urls={url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=default={peer_url}"),
        ],
        &[],
    );
    eventually(30, "etcd listening", || {
        svc.check_alive();
        listening(&format!("127.0.0.1:{client}"))
    });
    (svc, url)
}

/// etcd and a CBOR-off kube-apiserver on it (prefix `/registry`), bound to loopback
/// on a free port and advertising `advertise`: the suite's own, and the one of the
/// kubeadm layout.
pub fn etcd_and_apiserver(
    assets: &Assets,
    dir: &Path,
    pki: &Pki,
    advertise: &str,
) -> (Service, String, Apiserver) {
    let (etcd, etcd_url) = etcd(assets, dir, "etcd");
    let port = free_port();
    let api = Apiserver::start(
        assets,
        dir,
        pki,
        ApiserverOpts {
            name: "kube-apiserver",
            etcd: &etcd_url,
            prefix: "/registry",
            cbor: false,
            bind: "127.0.0.1",
            advertise,
            port,
            extra: vec![],
        },
    );
    (etcd, etcd_url, api)
}

/// How a kube-apiserver is started.
pub struct ApiserverOpts<'a> {
    pub name: &'a str,
    pub etcd: &'a str,
    pub prefix: &'a str,
    pub cbor: bool,
    /// `--bind-address`, `--advertise-address`, `--secure-port`.
    pub bind: &'a str,
    pub advertise: &'a str,
    pub port: u16,
    pub extra: Vec<String>,
}

/// A kube-apiserver with kubeadm's authentication flags (client CA, request-header
/// CA and allowed names, service accounts), RBAC, and a Metadata-level audit log.
pub struct Apiserver {
    pub svc: Service,
    pub addr: String,
    pub audit: PathBuf,
    pub cbor: bool,
}

impl Apiserver {
    pub fn start(assets: &Assets, dir: &Path, pki: &Pki, o: ApiserverOpts) -> Apiserver {
        let audit_policy = dir.join("audit-policy.yaml");
        std::fs::write(
            &audit_policy,
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n- level: Metadata\n",
        )
        .unwrap();
        let audit = dir.join(format!("{}-audit.log", o.name));
        let mut args = vec![
            format!("--bind-address={}", o.bind),
            format!("--advertise-address={}", o.advertise),
            format!("--secure-port={}", o.port),
            format!("--etcd-servers={}", o.etcd),
            format!("--etcd-prefix={}", o.prefix),
            format!("--tls-cert-file={}", pki.apiserver.cert_path),
            format!("--tls-private-key-file={}", pki.apiserver.key_path),
            format!("--client-ca-file={}", pki.ca.path),
            format!("--requestheader-client-ca-file={}", pki.front_proxy_ca.path),
            "--requestheader-allowed-names=front-proxy-client".into(),
            "--requestheader-username-headers=X-Remote-User".into(),
            "--requestheader-group-headers=X-Remote-Group".into(),
            "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
            format!(
                "--proxy-client-cert-file={}",
                pki.front_proxy_client.cert_path
            ),
            format!(
                "--proxy-client-key-file={}",
                pki.front_proxy_client.key_path
            ),
            format!("--token-auth-file={}", s(&pki.tokens)),
            "--authorization-mode=Node,RBAC".into(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
            format!("--service-account-key-file={}", s(&pki.sa_pub)),
            format!("--service-account-signing-key-file={}", s(&pki.sa_key)),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--allow-privileged=true".into(),
            format!("--audit-policy-file={}", s(&audit_policy)),
            format!("--audit-log-path={}", s(&audit)),
            "--audit-log-mode=blocking".into(),
        ];
        // 1.30 does not know the gate and refuses to start with it; it has no CBOR anyway.
        if !assets.legacy {
            args.push(format!("--feature-gates=CBORServingAndStorage={}", o.cbor));
        }
        args.extend(o.extra);
        let svc = Service::start(dir, o.name, assets.bin("kube-apiserver"), args, &[]);
        let mut a = Apiserver {
            svc,
            addr: format!(
                "{}:{}",
                if o.bind == "0.0.0.0" {
                    "127.0.0.1"
                } else {
                    o.bind
                },
                o.port
            ),
            audit,
            cbor: o.cbor,
        };
        a.wait_ready(pki);
        a
    }

    /// Poll `/readyz` (as the admin) until it says `ok`.
    pub fn wait_ready(&mut self, pki: &Pki) {
        let c = self.admin(pki);
        let svc = &mut self.svc;
        eventually(180, "kube-apiserver ready", || {
            svc.check_alive();
            c.try_request("GET", "/readyz", &[], None)
                .is_ok_and(|r| r.status == 200 && r.body == b"ok")
        });
    }

    /// A client of this apiserver, directly, as the cluster admin (x509).
    pub fn admin(&self, pki: &Pki) -> Client {
        Client::with_leaf(&self.addr, &pki.ca.path, &pki.admin)
    }
}

/// cborgate in front of an apiserver.
pub struct Gate {
    pub svc: Service,
    pub addr: String,
    pub admin: String,
    pub mode: String,
    /// The client CA bundle it verifies clients with (`--client-ca-file`).
    pub client_ca: PathBuf,
}

impl Gate {
    /// `cborgate serve --mode MODE` on `listen`, TLS with the cluster CA for clients
    /// and the front-proxy client certificate upstream, as deploy/README.md says.
    pub fn start(
        dir: &Path,
        name: &str,
        pki: &Pki,
        upstream: &str,
        mode: &str,
        listen: &str,
        extra: &[&str],
    ) -> Gate {
        // Its own copy of the client CA bundle, which a case rotates.
        let client_ca = dir.join(format!("{name}-client-ca.crt"));
        std::fs::copy(&pki.ca.path, &client_ca).unwrap();
        let client_ca = s(&client_ca);
        let mut identity = owned(&[
            "--client-ca-file",
            &client_ca,
            "--upstream-client-cert",
            &pki.front_proxy_client.cert_path,
            "--upstream-client-key",
            &pki.front_proxy_client.key_path,
            "--requestheader-client-ca-file",
            &pki.front_proxy_ca.path,
            "--requestheader-allowed-names",
            "front-proxy-client",
        ]);
        identity.extend(owned(extra));
        let mut g = Gate::start_with(dir, name, pki, upstream, mode, listen, identity);
        g.client_ca = PathBuf::from(client_ca);
        g
    }

    /// `cborgate serve --mode MODE` on `listen` with the suite's serving certificate,
    /// in front of `upstream` (verified with the cluster CA), and `identity`: the
    /// client-certificate and front-proxy flags, and any others.
    pub fn start_with(
        dir: &Path,
        name: &str,
        pki: &Pki,
        upstream: &str,
        mode: &str,
        listen: &str,
        identity: Vec<String>,
    ) -> Gate {
        let admin = format!("127.0.0.1:{}", free_port());
        let mut args = owned(&[
            "serve",
            "--listen",
            listen,
            "--admin",
            &admin,
            "--mode",
            mode,
            "--upstream",
            &format!("https://{upstream}"),
            "--upstream-ca",
            &pki.ca.path,
            "--tls-cert",
            &pki.gate_serving.cert_path,
            "--tls-key",
            &pki.gate_serving.key_path,
        ]);
        args.extend(identity);
        let program = std::env::var_os("CBORGATE_BIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_cborgate")));
        let svc = Service::start(dir, name, program, args, &[("RUST_LOG", "info")]);
        let mut g = Gate {
            svc,
            addr: listen.to_string(),
            admin,
            mode: mode.to_string(),
            client_ca: PathBuf::new(),
        };
        g.wait_listening();
        g
    }

    pub fn wait_listening(&mut self) {
        let (addr, admin, svc) = (&self.addr, &self.admin, &mut self.svc);
        eventually(30, "cborgate listening", || {
            svc.check_alive();
            listening(addr) && listening(admin)
        });
    }

    /// A client of cborgate with the given certificate.
    pub fn client(&self, pki: &Pki, leaf: &Leaf) -> Client {
        Client::with_leaf(&self.addr, &pki.ca.path, leaf)
    }

    pub fn client_as(&self, pki: &Pki, cred: &Cred) -> Client {
        Client::new(&self.addr, &pki.ca.path, cred)
    }

    /// The admin listener's `/metrics` text.
    pub fn metrics(&self) -> String {
        let r = self.admin_get("/metrics");
        assert_eq!(r.status, 200);
        r.text()
    }

    /// The status of the admin listener's `/readyz`, or None if it does not answer.
    pub fn readyz(&self) -> Option<u16> {
        let mut c = std::net::TcpStream::connect(&self.admin).ok()?;
        use std::io::{Read, Write};
        c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
        c.write_all(b"GET /readyz HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
            .ok()?;
        let mut out = String::new();
        c.read_to_string(&mut out).ok()?;
        out.get(9..12)?.parse().ok()
    }

    /// The admin listener's `/readyz`: its status and body.
    pub fn readyz_text(&self) -> (u16, String) {
        let r = self.admin_get("/readyz");
        (r.status, r.text())
    }

    /// `GET path` on the admin listener.
    fn admin_get(&self, path: &str) -> cborgate_standin::client::Resp {
        cborgate_standin::client::once(self.admin.parse().unwrap(), "GET", path, &[], None)
    }

    /// Sum of the samples of `name` whose labels contain every `filter` pair.
    pub fn metric(&self, name: &str, filter: &[(&str, &str)]) -> f64 {
        metric_sum(&self.metrics(), name, filter)
    }
}

/// The tests' one reader of Prometheus text.
pub use crate::support::harness::{metric_sum, samples};

/// A kubeconfig for `server` (`IP:PORT`) with a client certificate or a token.
pub fn kubeconfig(path: &Path, server: &str, pki: &Pki, cred: &Cred) -> PathBuf {
    let user = match cred {
        Cred::Anonymous => "{}".to_string(),
        Cred::Token(t) => format!("{{token: {t}}}"),
        Cred::Cert { cert, key } => {
            format!("{{client-certificate: {cert}, client-key: {key}}}")
        }
    };
    std::fs::write(
        path,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: {{server: 'https://{server}', certificate-authority: {}}}\nusers:\n- name: u\n  user: {user}\ncontexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
            pki.ca.path
        ),
    )
    .unwrap();
    path.to_path_buf()
}

pub fn cert_cred(leaf: &Leaf) -> Cred {
    Cred::Cert {
        cert: leaf.cert_path.clone(),
        key: leaf.key_path.clone(),
    }
}

/// client-go's CBOR gates, as the rig and kubeadm users set them.
pub const CBOR_GATES: [(&str, &str); 2] = [
    ("KUBE_FEATURE_ClientsAllowCBOR", "true"),
    ("KUBE_FEATURE_ClientsPreferCBOR", "true"),
];

/// The same gates as a component flag: kube-controller-manager and kube-scheduler
/// register client-go's gates in their own `--feature-gates` (1.36 `--help` lists
/// them), which is what they then read.
pub const CBOR_GATES_FLAG: &str = "--feature-gates=ClientsAllowCBOR=true,ClientsPreferCBOR=true";

/// kube-controller-manager as kubeadm runs it (`--use-service-account-credentials`),
/// its kubeconfig pointing at `server`, with the CBOR gates on.
pub fn controller_manager(
    assets: &Assets,
    dir: &Path,
    pki: &Pki,
    name: &str,
    server: &str,
    extra: &[&str],
) -> Service {
    let kc = kubeconfig(
        &dir.join(format!("{name}.kubeconfig")),
        server,
        pki,
        &cert_cred(&pki.controller_manager),
    );
    let kc = s(&kc);
    let mut args = vec![
        format!("--kubeconfig={kc}"),
        format!("--authentication-kubeconfig={kc}"),
        format!("--authorization-kubeconfig={kc}"),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={}", free_port()),
        format!("--cert-dir={}", s(&dir.join(format!("{name}-certs")))),
        format!("--service-account-private-key-file={}", s(&pki.sa_key)),
        format!("--root-ca-file={}", pki.ca.path),
        "--use-service-account-credentials=true".into(),
        CBOR_GATES_FLAG.into(),
        "--controllers=*,bootstrapsigner,tokencleaner".into(),
    ];
    args.extend(owned(extra));
    Service::start(
        dir,
        name,
        assets.bin("kube-controller-manager"),
        args,
        &CBOR_GATES,
    )
}

/// kube-scheduler with its x509 kubeconfig pointing at `server`, CBOR gates on.
pub fn scheduler(assets: &Assets, dir: &Path, pki: &Pki, server: &str) -> Service {
    let kc = kubeconfig(
        &dir.join("scheduler.kubeconfig"),
        server,
        pki,
        &cert_cred(&pki.scheduler),
    );
    let kc = s(&kc);
    Service::start(
        dir,
        "kube-scheduler",
        assets.bin("kube-scheduler"),
        vec![
            format!("--kubeconfig={kc}"),
            format!("--authentication-kubeconfig={kc}"),
            format!("--authorization-kubeconfig={kc}"),
            "--bind-address=127.0.0.1".into(),
            format!("--secure-port={}", free_port()),
            "--leader-elect=true".into(),
            CBOR_GATES_FLAG.into(),
        ],
        &CBOR_GATES,
    )
}

/// What a kubectl run printed.
pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// stdout, or fail the test with stderr.
    pub fn expect(self, what: &str) -> String {
        assert!(self.ok, "kubectl {what}: {}", self.stderr);
        self.stdout
    }
}

/// `kubectl --kubeconfig KC ARGS…`, with the CBOR gates if `cbor`, and `stdin`.
pub fn kubectl(assets: &Assets, kc: &Path, cbor: bool, args: &[&str], stdin: Option<&str>) -> Out {
    use std::io::Write;
    let mut cmd = Command::new(assets.bin("kubectl"));
    cmd.arg(format!("--kubeconfig={}", s(kc)))
        .args(args)
        .env("HOME", kc.parent().unwrap())
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (k, v) in CBOR_GATES {
        if cbor {
            cmd.env(k, v);
        } else {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().expect("kubectl");
    let mut input = child.stdin.take().unwrap();
    if let Some(text) = stdin {
        input.write_all(text.as_bytes()).unwrap();
    }
    drop(input);
    let o = child.wait_with_output().unwrap();
    Out {
        ok: o.status.success(),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Poll a JSON GET (as `client`) until `pred` holds on the body; the body.
pub fn wait_json(
    client: &Client,
    secs: u64,
    what: &str,
    path: &str,
    mut pred: impl FnMut(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let mut last = String::new();
    poll(Duration::from_secs(secs), || {
        let r = client
            .try_request("GET", path, &[("Accept", "application/json")], None)
            .ok()?;
        last = format!("{} {}", r.status, r.text());
        if r.status != 200 {
            return None;
        }
        let v = r.json();
        pred(&v).then_some(v)
    })
    .unwrap_or_else(|| panic!("not within {secs} s: {what}; last answer to GET {path}: {last}"))
}

/// Poll until GET `path` answers 404.
pub fn wait_gone(client: &Client, secs: u64, what: &str, path: &str) {
    eventually(secs, what, || {
        client
            .try_request("GET", path, &[("Accept", "application/json")], None)
            .is_ok_and(|r| r.status == 404)
    });
}
