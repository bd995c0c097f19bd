//! Certificates made at run time, as the tests make them: a CA and a server certificate
//! for localhost, as PEM files in a temporary directory (removed on drop). ECDSA P-256
//! keys from rcgen for the idle watches over HTTP/2; RSA-2048 keys, as kubeadm makes
//! them (`kubeadm init` writes RSA-2048 for the CA and kube-apiserver's serving
//! certificate), for the TLS handshake scenario. ring cannot generate RSA keys, so those
//! come from `openssl genpkey` and rcgen signs with them.

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::CertificateDer;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The serving key's kind.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum KeyKind {
    EcdsaP256,
    Rsa2048,
}

/// A CA and a server certificate for localhost, as PEM files in `dir`.
pub struct Pki {
    pub dir: PathBuf,
    pub ca: CertificateDer<'static>,
}

impl Pki {
    /// ECDSA P-256 keys (rcgen's default).
    pub fn make() -> Pki {
        Pki::make_with(KeyKind::EcdsaP256).expect("make the PKI")
    }

    /// The CA's and the server's keys of `kind`; an error (one line) when they cannot be
    /// made (RSA needs `openssl` on `PATH`).
    pub fn make_with(kind: KeyKind) -> Result<Pki, String> {
        let dir =
            std::env::temp_dir().join(format!("cborgate-load-pki-{}-{kind:?}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // Dropped (and removed) on any early return below.
        let mut pki = Pki {
            dir,
            ca: CertificateDer::from(Vec::new()),
        };
        let key = |name: &str| match kind {
            KeyKind::EcdsaP256 => KeyPair::generate().map_err(|e| format!("{name} key: {e}")),
            KeyKind::Rsa2048 => rsa_2048(&pki.dir.join(format!("{name}-rsa.key"))),
        };
        let ca_key = key("ca")?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(|e| e.to_string())?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "cborgate-load CA");
        let ca_cert = ca.self_signed(&ca_key).map_err(|e| e.to_string())?;
        let issuer = Issuer::new(ca, ca_key);
        let server_key = key("server")?;
        let srv = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .map_err(|e| e.to_string())?
            .signed_by(&server_key, &issuer)
            .map_err(|e| e.to_string())?;
        let w = |name: &str, s: &str| {
            std::fs::write(pki.dir.join(name), s).map_err(|e| format!("write {name}: {e}"))
        };
        w("ca.pem", &ca_cert.pem())?;
        w("server.pem", &srv.pem())?;
        w("server.key", &server_key.serialize_pem())?;
        // haproxy's `crt`: the certificate and its key in one file.
        w(
            "server-and-key.pem",
            &format!("{}{}", srv.pem(), server_key.serialize_pem()),
        )?;
        pki.ca = ca_cert.der().clone();
        Ok(pki)
    }

    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).to_string_lossy().into_owned()
    }

    /// The flags that give a cborgate this certificate on its TLS listener.
    pub fn serving(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            self.path("server.pem"),
            "--tls-key".into(),
            self.path("server.key"),
        ]
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A fresh RSA-2048 key from `openssl genpkey` (PKCS#8 PEM, written to `path`), for
/// rcgen to sign with.
fn rsa_2048(path: &Path) -> Result<KeyPair, String> {
    let out = Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("an RSA-2048 key needs openssl: {e}"))?;
    if !out.status.success() {
        let said = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "openssl genpkey failed: {}",
            said.lines().next().unwrap_or("").trim()
        ));
    }
    let pem = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    KeyPair::from_pem(&pem).map_err(|e| format!("the RSA key from openssl: {e}"))
}
