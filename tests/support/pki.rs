//! Certificates made in the test: a self-signed certificate and key as PEM files, and
//! certificate authorities signing client and server certificates.
#![allow(dead_code)]

use std::path::Path;

/// A self-signed certificate for `cn` and its key, written as `<stem>.crt` and
/// `<stem>.key` in `dir` (overwriting them); returns both paths.
pub fn self_signed(dir: &Path, stem: &str, cn: &str) -> (String, String) {
    std::fs::create_dir_all(dir).unwrap();
    let c = rcgen::generate_simple_self_signed(vec![cn.to_string()]).unwrap();
    let (cert, key) = (
        dir.join(format!("{stem}.crt")),
        dir.join(format!("{stem}.key")),
    );
    std::fs::write(&cert, c.cert.pem()).unwrap();
    std::fs::write(&key, c.signing_key.serialize_pem()).unwrap();
    let s = |p: std::path::PathBuf| p.to_str().unwrap().to_string();
    (s(cert), s(key))
}

/// A certificate authority made in the test, written as `<name>.crt` in `dir`.
pub struct Ca {
    pub cert: rcgen::Certificate,
    pub path: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
    dir: std::path::PathBuf,
}

/// A certificate signed by a [`Ca`]: its PEM files and its DER chain and key.
pub struct Leaf {
    pub cert_path: String,
    pub key_path: String,
    pub der: rustls::pki_types::CertificateDer<'static>,
    pub key: rustls::pki_types::PrivateKeyDer<'static>,
}

impl Ca {
    pub fn new(dir: &Path, name: &str) -> Ca {
        use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
        std::fs::create_dir_all(dir).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let cert = p.self_signed(&key).unwrap();
        let path = dir.join(format!("{name}.crt"));
        std::fs::write(&path, cert.pem()).unwrap();
        Ca {
            cert,
            path: path.to_str().unwrap().to_string(),
            issuer: rcgen::Issuer::new(p, key),
            dir: dir.to_path_buf(),
        }
    }

    pub fn der(&self) -> rustls::pki_types::CertificateDer<'static> {
        self.cert.der().clone()
    }

    /// A client certificate (extended key usage clientAuth) with subject `CN=cn` and
    /// one O per entry of `orgs`, in order; `<stem>.crt` and `<stem>.key` in the CA's
    /// directory.
    pub fn client(&self, stem: &str, cn: &str, orgs: &[&str]) -> Leaf {
        self.leaf(
            None,
            stem,
            cn,
            orgs,
            &[],
            rcgen::ExtendedKeyUsagePurpose::ClientAuth,
        )
    }

    /// A server certificate for localhost and 127.0.0.1.
    pub fn server(&self, stem: &str) -> Leaf {
        self.leaf(
            None,
            stem,
            "localhost",
            &[],
            &["localhost", "127.0.0.1"],
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A server certificate with subject `CN=cn` for `names` (DNS names or IP
    /// addresses).
    pub fn server_for(&self, stem: &str, cn: &str, names: &[&str]) -> Leaf {
        self.leaf(
            None,
            stem,
            cn,
            &[],
            names,
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// As [`Ca::server_for`], on the key in `key_pem` (PKCS#8 PEM): an RSA key made
    /// outside, as kubeadm's are, which rcgen cannot generate on ring.
    pub fn server_with_key(&self, stem: &str, cn: &str, names: &[&str], key_pem: &str) -> Leaf {
        let key = rcgen::KeyPair::from_pem(key_pem).unwrap();
        self.leaf(
            Some(key),
            stem,
            cn,
            &[],
            names,
            rcgen::ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A certificate on `key`, or on a new ECDSA P-256 key.
    fn leaf(
        &self,
        key: Option<rcgen::KeyPair>,
        stem: &str,
        cn: &str,
        orgs: &[&str],
        names: &[&str],
        usage: rcgen::ExtendedKeyUsagePurpose,
    ) -> Leaf {
        let key = key.unwrap_or_else(|| rcgen::KeyPair::generate().unwrap());
        use rcgen::{CertificateParams, DnType};
        let mut p = CertificateParams::new(names.iter().map(|s| s.to_string()).collect::<Vec<_>>())
            .unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        p.distinguished_name.push(DnType::CommonName, cn);
        // rcgen keeps one value per attribute type: each further O goes in under the
        // same OID spelled as a custom type (two at most).
        assert!(orgs.len() <= 2, "at most two O values");
        for (i, o) in orgs.iter().enumerate() {
            let ty = match i {
                0 => DnType::OrganizationName,
                _ => DnType::CustomDnType(vec![2, 5, 4, 10]),
            };
            p.distinguished_name.push(ty, *o);
        }
        p.extended_key_usages = vec![usage];
        let cert = p.signed_by(&key, &self.issuer).unwrap();
        let (cert_path, key_path) = (
            self.dir.join(format!("{stem}.crt")),
            self.dir.join(format!("{stem}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        Leaf {
            cert_path: cert_path.to_str().unwrap().to_string(),
            key_path: key_path.to_str().unwrap().to_string(),
            der: cert.der().clone(),
            key: rustls::pki_types::PrivateKeyDer::Pkcs8(key.serialize_der().into()),
        }
    }
}

/// The crypto provider the tests' TLS ends use (ring, as cborgate).
pub fn provider() -> std::sync::Arc<rustls::crypto::CryptoProvider> {
    std::sync::Arc::new(rustls::crypto::ring::default_provider())
}

/// A TLS acceptor serving `cert` that verifies client certificates against `ca`:
/// required, or, with `optional`, checked only when a client presents one.
pub fn client_cert_acceptor(
    ca: rustls::pki_types::CertificateDer<'static>,
    cert: rustls::pki_types::CertificateDer<'static>,
    key: rustls::pki_types::PrivateKeyDer<'static>,
    optional: bool,
) -> tokio_rustls::TlsAcceptor {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).unwrap();
    let builder = rustls::server::WebPkiClientVerifier::builder_with_provider(
        std::sync::Arc::new(roots),
        provider(),
    );
    let builder = if optional {
        builder.allow_unauthenticated()
    } else {
        builder
    };
    let cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(builder.build().unwrap())
        .with_single_cert(vec![cert], key)
        .unwrap();
    tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(cfg))
}
