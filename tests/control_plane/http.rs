//! HTTPS to the apiserver and to cborgate, as the suite's own clients: the
//! stand-in crate's HTTP/1.1 client over rustls, with a client certificate, a
//! bearer token, or nothing (anonymous).

use crate::support::pki::{provider, Leaf};
use cborgate_standin::client::{Conn, Resp};
use rustls::pki_types::ServerName;
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;

pub type TlsConn = Conn<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>;

/// Who a client is.
#[derive(Clone)]
pub enum Cred {
    Anonymous,
    Token(String),
    Cert { cert: String, key: String },
}

/// A client of one HTTPS endpoint.
#[derive(Clone)]
pub struct Client {
    pub addr: String,
    cfg: Arc<rustls::ClientConfig>,
    token: Option<String>,
}

impl Client {
    /// A client of `addr` (`IP:PORT`) that trusts the CA in `ca_pem`.
    pub fn new(addr: &str, ca_pem: &str, cred: &Cred) -> Client {
        let mut roots = rustls::RootCertStore::empty();
        for c in rustls_pemfile_certs(ca_pem) {
            roots.add(c).unwrap();
        }
        let b = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let (cfg, token) = match cred {
            Cred::Anonymous => (b.with_no_client_auth(), None),
            Cred::Token(t) => (b.with_no_client_auth(), Some(t.clone())),
            Cred::Cert { cert, key } => {
                let certs = rustls_pemfile_certs(cert);
                let key = rustls::pki_types::PrivateKeyDer::from_pem_file(key).unwrap();
                (b.with_client_auth_cert(certs, key).unwrap(), None)
            }
        };
        Client {
            addr: addr.to_string(),
            cfg: Arc::new(cfg),
            token,
        }
    }

    /// A client for `leaf`'s certificate.
    pub fn with_leaf(addr: &str, ca_pem: &str, leaf: &Leaf) -> Client {
        Client::new(
            addr,
            ca_pem,
            &Cred::Cert {
                cert: leaf.cert_path.clone(),
                key: leaf.key_path.clone(),
            },
        )
    }

    /// A new connection (HTTP/1.1 over TLS; the handshake happens on first use).
    pub fn try_conn(&self) -> std::io::Result<TlsConn> {
        let s = TcpStream::connect(&self.addr)?;
        s.set_read_timeout(Some(Duration::from_secs(60)))?;
        s.set_nodelay(true)?;
        let ip = self.addr.rsplit_once(':').unwrap().0;
        let name = ServerName::try_from(ip.to_string()).unwrap();
        let tls = rustls::ClientConnection::new(self.cfg.clone(), name).unwrap();
        Ok(Conn::over(rustls::StreamOwned::new(tls, s)))
    }

    pub fn conn(&self) -> TlsConn {
        self.try_conn().expect("connect")
    }

    /// The request's headers with this client's Authorization added.
    pub fn headers<'a>(&'a self, headers: &[(&'a str, &'a str)]) -> Vec<(&'a str, String)> {
        let mut h: Vec<(&str, String)> = vec![("Host", self.addr.clone())];
        if let Some(t) = &self.token {
            h.push(("Authorization", format!("Bearer {t}")));
        }
        h.extend(headers.iter().map(|(k, v)| (*k, v.to_string())));
        h
    }

    /// Send a request on `conn` with this client's credentials.
    pub fn send(
        &self,
        conn: &mut TlsConn,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) {
        let h = self.headers(headers);
        let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
        conn.send(method, path, &h, body);
    }

    /// One request on a new connection; an error for a connection or framing failure.
    pub fn try_request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> std::io::Result<Resp> {
        let mut c = self.try_conn()?;
        self.send(&mut c, method, path, headers, body);
        c.try_response(method)
    }

    /// One request on a new connection.
    pub fn request(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: Option<&[u8]>,
    ) -> Resp {
        self.try_request(method, path, headers, body)
            .unwrap_or_else(|e| panic!("{method} {path} to {}: {e}", self.addr))
    }

    /// GET with `Accept: application/json`, the body as JSON (the status must be 200).
    pub fn get_json(&self, path: &str) -> serde_json::Value {
        let r = self.request("GET", path, &[("Accept", "application/json")], None);
        assert_eq!(r.status, 200, "GET {path}: {}", r.text());
        r.json()
    }
}

/// Every certificate of a PEM file.
pub fn rustls_pemfile_certs(path: &str) -> Vec<rustls::pki_types::CertificateDer<'static>> {
    use rustls::pki_types::pem::PemObject;
    rustls::pki_types::CertificateDer::pem_file_iter(path)
        .unwrap()
        .map(|c| c.unwrap())
        .collect()
}

use rustls::pki_types::pem::PemObject as _;
