//! Client certificates on the proxy listener (`server.client_ca_file`,
//! `server.requestheader_client_ca_file`): the CA bundles, reloadable, as the rustls
//! verifier of every new handshake, and what a verified certificate proves.
//!
//! - [`ClientCas`] asks every client for a certificate without requiring one. A
//!   certificate that verifies (for client auth) against neither bundle fails the
//!   handshake, as it does on kube-apiserver; no request ever comes from it.
//! - After the handshake, [`PeerCertCallback`] checks the chain against each bundle on
//!   its own and records the verdict, a [`PeerCert`], in the connection's TLS digest,
//!   where the proxy reads it for each request (HTTP/1.1 and every HTTP/2 stream).
//! - The subject is read as kube-apiserver's x509 authenticator reads it: the CN is the
//!   user (the last CN, as Go keeps it), each O a group, and the certificate's SHA-256
//!   the `authentication.kubernetes.io/credential-id` extra.
//!
//! A reload swaps the bundles in place: the next handshake uses the new ones, open
//! connections keep the verdict they were accepted with.

use crate::metrics::metrics;
use crate::negotiate::identity::{FrontProxy, Method, PeerCert, User};
use crate::tls::certificates;
use async_trait::async_trait;
use pingora::listeners::TlsAccept;
use pingora::protocols::tls::TlsRef;
use rustls::client::danger::HandshakeSignatureValid;
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};
use std::any::Any;
use std::sync::{Arc, RwLock};
use x509_parser::prelude::{FromDer, X509Certificate};

/// The extra key kube-apiserver gives a certificate's fingerprint under.
const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

type Verifier = Arc<dyn ClientCertVerifier>;

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A verifier for client certificates signed by the CAs in `path`.
fn verifier(path: &str) -> Result<Verifier, String> {
    let mut roots = rustls::RootCertStore::empty();
    for der in certificates(path)? {
        roots
            .add(der)
            .map_err(|e| format!("{path}: not a usable CA certificate: {e}"))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| format!("{path}: {e}"))
}

/// The client CA bundles and who may act as a front proxy.
#[derive(Debug)]
pub struct ClientCas {
    /// `server.client_ca_file`.
    client: RwLock<Option<Verifier>>,
    /// `server.requestheader_client_ca_file`.
    front_proxy: RwLock<Option<Verifier>>,
    /// `server.requestheader_allowed_names` (empty: any CN the CA signed).
    allowed_names: Vec<String>,
    /// The provider's signature algorithms, read once rather than per handshake.
    algorithms: WebPkiSupportedAlgorithms,
}

fn current(v: &RwLock<Option<Verifier>>) -> Option<Verifier> {
    v.read().unwrap_or_else(|e| e.into_inner()).clone()
}

impl ClientCas {
    /// Load the bundles (each empty = not used); errors name the key and the file.
    pub fn load(
        client_ca: &str,
        front_proxy_ca: &str,
        allowed_names: &[String],
    ) -> Result<Arc<Self>, String> {
        let load = |key: &str, path: &str| match path {
            "" => Ok(None),
            p => verifier(p).map(Some).map_err(|e| format!("{key}: {e}")),
        };
        Ok(Arc::new(ClientCas {
            client: RwLock::new(load("server.client_ca_file (--client-ca-file)", client_ca)?),
            front_proxy: RwLock::new(load(
                "server.requestheader_client_ca_file (--requestheader-client-ca-file)",
                front_proxy_ca,
            )?),
            allowed_names: allowed_names.to_vec(),
            algorithms: provider().signature_verification_algorithms,
        }))
    }

    /// Reload `server.client_ca_file` (or, `front_proxy`,
    /// `server.requestheader_client_ca_file`) from `path`; on error the previous
    /// bundle stays.
    pub fn reload(&self, front_proxy: bool, path: &str) -> Result<(), String> {
        let v = verifier(path)?;
        let slot = if front_proxy {
            &self.front_proxy
        } else {
            &self.client
        };
        *slot.write().unwrap_or_else(|e| e.into_inner()) = Some(v);
        Ok(())
    }

    /// What a certificate chain (leaf first) proves against the current bundles
    /// (`None`: no certificate). One that verifies against neither (a TLS session
    /// resumed after a reload) is `unverified`.
    pub fn judge(&self, chain: &[CertificateDer<'static>]) -> Option<PeerCert> {
        let (leaf, intermediates) = chain.split_first()?;
        let now = UnixTime::now();
        let verifies = |v: Option<Verifier>| {
            v.is_some_and(|v| v.verify_client_cert(leaf, intermediates, now).is_ok())
        };
        let client_ca = verifies(current(&self.client));
        let fp_verified = verifies(current(&self.front_proxy));
        if !client_ca && !fp_verified {
            return Some(PeerCert {
                unverified: true,
                ..PeerCert::default()
            });
        }
        let subject = Subject::of(leaf);
        let front_proxy = match (fp_verified, &subject) {
            (false, _) => FrontProxy::No,
            (true, Some(s))
                if self.allowed_names.is_empty()
                    || s.cn
                        .as_ref()
                        .is_some_and(|cn| self.allowed_names.contains(cn)) =>
            {
                FrontProxy::Allowed
            }
            (true, _) => FrontProxy::NotAllowed,
        };
        let x509 = match (client_ca, subject) {
            (
                true,
                Some(Subject {
                    cn: Some(name),
                    groups,
                }),
            ) if !name.is_empty() => Some(User {
                name,
                groups,
                extra: vec![(CREDENTIAL_ID.into(), credential_id(leaf))],
            }),
            _ => None,
        };
        Some(PeerCert {
            unverified: false,
            x509,
            client_ca,
            front_proxy,
        })
    }
}

/// `X509SHA256=<hex>`, kube-apiserver's credential id of a certificate.
fn credential_id(leaf: &CertificateDer<'_>) -> String {
    let mut id = String::from("X509SHA256=");
    for b in pingora::tls::hash_certificate(leaf) {
        id.push_str(&format!("{b:02x}"));
    }
    id
}

/// The parts of a subject that name a user.
#[derive(Debug, PartialEq, Eq)]
struct Subject {
    /// The last CN, as Go's `pkix.Name` keeps it (`None`: none, or not a string).
    cn: Option<String>,
    /// Every O, in order.
    groups: Vec<String>,
}

impl Subject {
    /// `None` when the certificate, or one of its O values, cannot be read.
    fn of(der: &CertificateDer<'_>) -> Option<Subject> {
        let (_, cert) = X509Certificate::from_der(der.as_ref()).ok()?;
        let name = cert.subject();
        let cn = name
            .iter_common_name()
            .last()
            .and_then(|a| a.as_str().ok())
            .map(str::to_string);
        let groups = name
            .iter_organization()
            .map(|a| a.as_str().map(str::to_string).ok())
            .collect::<Option<Vec<_>>>()?;
        Some(Subject { cn, groups })
    }
}

impl ClientCertVerifier for ClientCas {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    /// No hints: the bundles reload, and a borrowed list cannot follow them. Clients
    /// then offer the certificate they have (Go's and curl's do).
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        let mut result = Err(rustls::Error::General("no client CA configured".into()));
        for v in [current(&self.client), current(&self.front_proxy)]
            .into_iter()
            .flatten()
        {
            result = v.verify_client_cert(end_entity, intermediates, now);
            if result.is_ok() {
                break;
            }
        }
        // pingora reads the accepted certificate with a parser that panics on what it
        // cannot read: a certificate it cannot read is refused here instead.
        if result.is_ok() && X509Certificate::from_der(end_entity.as_ref()).is_err() {
            result = Err(rustls::Error::General(
                "unreadable client certificate".into(),
            ));
        }
        if result.is_err() {
            metrics()
                .authentications_total
                .with_label_values(&[Method::X509.as_str(), "failure"])
                .inc();
        }
        result
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// pingora's post-handshake callback: the verdict on the peer's certificate, kept in
/// the connection's TLS digest.
pub struct PeerCertCallback(pub Arc<ClientCas>);

#[async_trait]
impl TlsAccept for PeerCertCallback {
    async fn handshake_complete_callback(
        &self,
        tls: &TlsRef,
    ) -> Option<Arc<dyn Any + Send + Sync>> {
        let chain = tls.peer_cert_chain_der()?;
        let peer = self.0.judge(chain)?;
        Some(Arc::new(peer))
    }
}

/// The verdict recorded for a connection, if any (read from pingora's digest).
pub fn peer_cert(digest: Option<&pingora::protocols::Digest>) -> Option<&PeerCert> {
    digest?.ssl_digest.as_ref()?.extension.get::<PeerCert>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{
        BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    };

    struct Ca {
        pem: String,
        issuer: Issuer<'static, KeyPair>,
    }

    fn ca(name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        let cert = p.self_signed(&key).unwrap();
        Ca {
            pem: cert.pem(),
            issuer: Issuer::new(p, key),
        }
    }

    fn leaf(ca: &Ca, cn: Option<&str>, orgs: &[&str]) -> CertificateDer<'static> {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name = rcgen::DistinguishedName::new();
        if let Some(cn) = cn {
            p.distinguished_name.push(DnType::CommonName, cn);
        }
        // rcgen keeps one value per attribute type: a second O goes in under the same
        // OID spelled as a custom type.
        for (i, o) in orgs.iter().enumerate() {
            let ty = match i {
                0 => DnType::OrganizationName,
                _ => DnType::CustomDnType(vec![2, 5, 4, 10]),
            };
            p.distinguished_name.push(ty, *o);
        }
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        p.signed_by(&key, &ca.issuer).unwrap().der().clone()
    }

    fn write(dir: &std::path::Path, name: &str, pem: &str) -> String {
        std::fs::create_dir_all(dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, pem).unwrap();
        p.to_str().unwrap().to_string()
    }

    #[test]
    fn verdicts_per_bundle_and_reload() {
        let dir = std::env::temp_dir().join(format!("cborgate-client-cert-{}", std::process::id()));
        let (cluster, fp, other) = (ca("cluster"), ca("front-proxy"), ca("other"));
        let cluster_path = write(&dir, "cluster.pem", &cluster.pem);
        let fp_path = write(&dir, "fp.pem", &fp.pem);
        let cas = ClientCas::load(&cluster_path, &fp_path, &["front-proxy-client".into()]).unwrap();
        let alice = leaf(&cluster, Some("alice"), &["devs", "ops"]);
        let got = cas.judge(std::slice::from_ref(&alice)).unwrap();
        let user = got.x509.unwrap();
        assert_eq!(
            (user.name.as_str(), user.groups),
            ("alice", vec!["devs".into(), "ops".into()])
        );
        assert_eq!(user.extra[0].0, CREDENTIAL_ID);
        assert_eq!(user.extra[0].1.len(), "X509SHA256=".len() + 64);
        assert_eq!(got.front_proxy, FrontProxy::No);
        // No CN: verified, but no user.
        let got = cas.judge(&[leaf(&cluster, None, &["devs"])]).unwrap();
        assert!(got.client_ca && got.x509.is_none());
        // Front proxies.
        let got = cas
            .judge(&[leaf(&fp, Some("front-proxy-client"), &[])])
            .unwrap();
        assert_eq!(
            (got.front_proxy, got.client_ca),
            (FrontProxy::Allowed, false)
        );
        let got = cas.judge(&[leaf(&fp, Some("intruder"), &[])]).unwrap();
        assert_eq!(got.front_proxy, FrontProxy::NotAllowed);
        assert!(got.x509.is_none());
        // Another CA: nothing, and the handshake verifier refuses it.
        let mallory = leaf(&other, Some("mallory"), &["system:masters"]);
        assert!(
            cas.judge(std::slice::from_ref(&mallory))
                .unwrap()
                .unverified
        );
        assert!(cas
            .verify_client_cert(&mallory, &[], UnixTime::now())
            .is_err());
        assert!(cas.verify_client_cert(&alice, &[], UnixTime::now()).is_ok());
        // Reload: the other CA becomes the client CA.
        let other_path = write(&dir, "other.pem", &other.pem);
        cas.reload(false, &other_path).unwrap();
        assert!(cas
            .verify_client_cert(&alice, &[], UnixTime::now())
            .is_err());
        assert_eq!(cas.judge(&[mallory]).unwrap().x509.unwrap().name, "mallory");
        // A bad file keeps the previous bundle.
        let junk = write(&dir, "junk.pem", "junk");
        assert!(cas.reload(false, &junk).is_err());
        assert!(cas.judge(&[alice]).unwrap().unverified);
        // Any CN allowed when the list is empty.
        let any = ClientCas::load("", &fp_path, &[]).unwrap();
        let got = any.judge(&[leaf(&fp, Some("whoever"), &[])]).unwrap();
        assert_eq!(got.front_proxy, FrontProxy::Allowed);
        let e = ClientCas::load(&junk, "", &[]).unwrap_err();
        assert!(
            e.starts_with("server.client_ca_file (--client-ca-file): ") && e.contains(&junk),
            "{e}"
        );
    }
}
