//! The HTTP/2 client of the end-to-end tests: a connection over TLS (ALPN `h2`), to
//! cborgate's TLS listener or straight to an upstream.
#![allow(dead_code)]

use super::pki::provider;
use rustls::pki_types::{CertificateDer, ServerName};
use std::sync::Arc;

/// An HTTP/2 connection over TLS (ALPN `h2`) to `addr`, its certificate verified for
/// `name` against `roots`; the connection is driven by a task of its own.
pub async fn connect(
    addr: impl tokio::net::ToSocketAddrs,
    name: &str,
    roots: impl IntoIterator<Item = CertificateDer<'static>>,
) -> h2::client::SendRequest<bytes::Bytes> {
    let mut store = rustls::RootCertStore::empty();
    for c in roots {
        store.add(c).unwrap();
    }
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(store)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from(name.to_string()).unwrap(), tcp)
        .await
        .unwrap();
    assert_eq!(
        tls.get_ref().1.alpn_protocol(),
        Some(&b"h2"[..]),
        "ALPN chose h2"
    );
    let (client, conn) = h2::client::handshake(tls).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    client
}
