//! Certificates, keys and CA bundles: the material TLS is made with, read from disk
//! (a file that cannot be read or parsed is an error naming the key and the file), and
//! swappable in place, so that `process::reload` can read them again without a restart
//! and without touching open connections.
//!
//! - [`ServingCert`] is the proxy listener's certificate, a rustls
//!   [`ResolvesServerCert`] whose key is swapped in place: the next handshake
//!   gets the new one, established connections keep theirs.
//! - [`UpstreamTls`] is the upstream CA bundle and client certificate that
//!   each new upstream connection is made with; its generation number keeps
//!   pooled connections made with older credentials from being reused.
//!
//! Every function here is total: bad files are errors, never panics. pingora's
//! `CertKey::new` and `WrappedX509::new` panic on DER they cannot parse, so
//! every certificate is parsed by rustls/webpki first, and those constructors
//! run only on input that passed.

use pingora::utils::tls::{CertKey, WrappedX509};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

/// Which set of files, for logs and the `file` label of `cborgate_reloads_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `server.tls_cert` and `server.tls_key`.
    Serving,
    /// `upstream.ca_file`.
    UpstreamCa,
    /// `upstream.client_cert` and `upstream.client_key`.
    UpstreamClient,
    /// `server.client_ca_file`.
    ClientCa,
    /// `server.requestheader_client_ca_file`.
    RequestHeaderCa,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::Serving,
        Kind::UpstreamCa,
        Kind::UpstreamClient,
        Kind::ClientCa,
        Kind::RequestHeaderCa,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Kind::Serving => "serving",
            Kind::UpstreamCa => "upstream_ca",
            Kind::UpstreamClient => "upstream_client",
            Kind::ClientCa => "client_ca",
            Kind::RequestHeaderCa => "requestheader_ca",
        }
    }

    /// The configuration keys, for messages.
    pub(crate) fn keys(self) -> &'static str {
        match self {
            Kind::Serving => "server.tls_cert/tls_key (--tls-cert/--tls-key)",
            Kind::UpstreamCa => "upstream.ca_file (--upstream-ca)",
            Kind::UpstreamClient => {
                "upstream.client_cert/client_key (--upstream-client-cert/--upstream-client-key)"
            }
            Kind::ClientCa => "server.client_ca_file (--client-ca-file)",
            Kind::RequestHeaderCa => {
                "server.requestheader_client_ca_file (--requestheader-client-ca-file)"
            }
        }
    }
}

fn read(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))
}

/// Every PEM certificate in a file, in order; at least one.
pub(crate) fn certificates(path: &str) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = read(path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("{path}: not a PEM certificate file: {e}"))?;
    if certs.is_empty() {
        return Err(format!("{path}: no PEM certificate in it"));
    }
    Ok(certs)
}

/// The earliest `notAfter` (Unix seconds) of the certificates in a PEM file.
pub fn earliest_expiry(path: &str) -> Result<i64, String> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    certificates(path)?
        .iter()
        .map(|der| {
            X509Certificate::from_der(der.as_ref())
                .map(|(_, c)| c.validity().not_after.timestamp())
                .map_err(|e| format!("{path}: a certificate could not be read: {e}"))
        })
        .try_fold(i64::MAX, |min, t| Ok(min.min(t?)))
}

fn private_key(path: &str) -> Result<PrivateKeyDer<'static>, String> {
    let pem = read(path)?;
    PrivateKeyDer::from_pem_slice(&pem).map_err(|e| format!("{path}: no PEM private key: {e}"))
}

/// A certificate chain and its key, checked to belong together.
fn certified_key(cert: &str, key: &str) -> Result<CertifiedKey, String> {
    let chain = certificates(cert)?;
    let private = private_key(key)?;
    CertifiedKey::from_der(chain, private, &rustls::crypto::ring::default_provider()).map_err(|e| {
        match e {
            rustls::Error::InconsistentKeys(_) => {
                format!("the key in {key} does not belong to the certificate in {cert}")
            }
            e => format!("{cert} with {key}: {e}"),
        }
    })
}

/// pingora's constructors panic on input their parser refuses; run them only on
/// certificates webpki parsed, and turn a panic all the same into an error.
fn guarded<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|_| format!("{what}: the certificate could not be parsed"))
}

/// The proxy listener's certificate and key.
#[derive(Debug)]
pub struct ServingCert {
    current: RwLock<Arc<CertifiedKey>>,
}

impl ServingCert {
    pub fn load(cert: &str, key: &str) -> Result<Arc<Self>, String> {
        let ck = certified_key(cert, key).map_err(|e| format!("{}: {e}", Kind::Serving.keys()))?;
        Ok(Arc::new(ServingCert {
            current: RwLock::new(Arc::new(ck)),
        }))
    }

    pub(crate) fn reload(&self, cert: &str, key: &str) -> Result<(), String> {
        let new = Arc::new(certified_key(cert, key)?);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = new;
        Ok(())
    }

    /// The certificate chain served now (for tests and logs).
    pub fn chain(&self) -> Vec<CertificateDer<'static>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .cert
            .clone()
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        )
    }
}

/// The CA bundle type pingora's rustls connector takes per peer.
pub type CaBundle = Arc<[WrappedX509]>;

fn ca_bundle(path: &str) -> Result<CaBundle, String> {
    let mut roots = rustls::RootCertStore::empty();
    let mut out = Vec::new();
    for der in certificates(path)? {
        roots
            .add(der.clone())
            .map_err(|e| format!("{path}: not a usable CA certificate: {e}"))?;
        let raw = der.as_ref().to_vec();
        out.push(guarded(path, move || {
            WrappedX509::new(raw, pingora::utils::tls::parse_x509)
        })?);
    }
    Ok(out.into())
}

fn client_cert_key(cert: &str, key: &str) -> Result<CertKey, String> {
    // Parses the chain and the key and checks they match.
    let checked = certified_key(cert, key)?;
    let der = private_key(key)?.secret_der().to_vec();
    // pingora's connector turns these bytes back into a key with `try_from(..).unwrap()`.
    PrivateKeyDer::try_from(der.clone()).map_err(|e| format!("{key}: {e}"))?;
    let chain: Vec<Vec<u8>> = checked.cert.iter().map(|c| c.as_ref().to_vec()).collect();
    guarded(cert, move || CertKey::new(chain, der))
}

/// What new upstream connections are made with.
#[derive(Debug, Default)]
pub struct UpstreamTls {
    ca: RwLock<Option<CaBundle>>,
    client: RwLock<Option<Arc<CertKey>>>,
    generation: AtomicU64,
}

impl UpstreamTls {
    /// Load `ca_file` and `client_cert`/`client_key` (each empty = not used).
    pub fn load(ca_file: &str, client_cert: &str, client_key: &str) -> Result<Arc<Self>, String> {
        let tls = UpstreamTls::default();
        if !ca_file.is_empty() {
            tls.set_ca(ca_file)
                .map_err(|e| format!("{}: {e}", Kind::UpstreamCa.keys()))?;
        }
        if !client_cert.is_empty() {
            tls.set_client(client_cert, client_key)
                .map_err(|e| format!("{}: {e}", Kind::UpstreamClient.keys()))?;
        }
        Ok(Arc::new(tls))
    }

    /// The CA bundle (None: the system roots).
    pub fn ca(&self) -> Option<CaBundle> {
        self.ca.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The client certificate and key, if any.
    pub fn client(&self) -> Option<Arc<CertKey>> {
        self.client
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Changes with every reload: pooled connections are keyed by it.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    fn set_ca(&self, path: &str) -> Result<(), String> {
        let ca = ca_bundle(path)?;
        *self.ca.write().unwrap_or_else(|e| e.into_inner()) = Some(ca);
        Ok(())
    }

    fn set_client(&self, cert: &str, key: &str) -> Result<(), String> {
        let ck = Arc::new(client_cert_key(cert, key)?);
        *self.client.write().unwrap_or_else(|e| e.into_inner()) = Some(ck);
        Ok(())
    }

    pub(crate) fn reload_ca(&self, path: &str) -> Result<(), String> {
        self.set_ca(path)?;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    pub(crate) fn reload_client(&self, cert: &str, key: &str) -> Result<(), String> {
        self.set_client(cert, key)?;
        self.generation.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_labels_are_the_metric_labels() {
        let labels: Vec<&str> = Kind::ALL.iter().map(|k| k.label()).collect();
        assert_eq!(labels, crate::metrics::RELOAD_FILES);
    }

    #[test]
    fn bad_files_are_errors_naming_the_key_and_file() {
        let dir = std::env::temp_dir().join(format!("cborgate-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let junk = dir.join("junk.pem");
        std::fs::write(
            &junk,
            "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        let junk = junk.to_str().unwrap();
        let e = ServingCert::load(junk, junk).unwrap_err();
        assert!(
            e.starts_with("server.tls_cert/tls_key (--tls-cert/--tls-key): ") && e.contains(junk),
            "{e}"
        );
        let e = UpstreamTls::load(junk, "", "").unwrap_err();
        assert!(
            e.starts_with("upstream.ca_file (--upstream-ca): ") && e.contains(junk),
            "{e}"
        );
        let e = UpstreamTls::load("", junk, junk).unwrap_err();
        assert!(
            e.starts_with(
                "upstream.client_cert/client_key (--upstream-client-cert/--upstream-client-key): "
            ) && e.contains(junk),
            "{e}"
        );
        let none = UpstreamTls::load("", "", "").unwrap();
        assert!(none.ca().is_none() && none.client().is_none());
    }
}
