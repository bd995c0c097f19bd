//! Idle watches over HTTP/2, as client-go holds them: one client connection to cborgate
//! (TLS, ALPN `h2`), and cborgate to an HTTP/2 upstream (a second cborgate, TLS, in
//! `native` mode in front of the static upstream). What one such watch costs cborgate,
//! and how many upstream connections a thousand of them take.

use bytes::Bytes;
use rustls::pki_types::{CertificateDer, ServerName};
use std::net::SocketAddr;
use std::sync::Arc;

/// Open `n` idle watches (`accept`) as streams of one HTTP/2 connection to `addr`, and
/// wait until each has its response head. Dropping the result ends them all.
pub async fn idle_watches(
    addr: SocketAddr,
    ca: &CertificateDer<'static>,
    n: usize,
    accept: &str,
) -> std::io::Result<(h2::client::SendRequest<Bytes>, Vec<h2::RecvStream>)> {
    let err = |e: &dyn std::fmt::Display| std::io::Error::other(e.to_string());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).map_err(|e| err(&e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| err(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let tcp = tokio::net::TcpStream::connect(addr).await?;
    let name = ServerName::try_from("localhost").map_err(|e| err(&e))?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(name, tcp)
        .await?;
    let (client, conn) = h2::client::handshake(tls).await.map_err(|e| err(&e))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut client = client.ready().await.map_err(|e| err(&e))?;
    let mut pending = Vec::with_capacity(n);
    for _ in 0..n {
        let req = http::Request::builder()
            .uri("https://localhost/api/v1/namespaces/load/pods?watch=1&idle=1")
            .header("accept", accept)
            // client-go's watches carry credentials; without any, cborgate sends a
            // request upstream over HTTP/1.1 on a connection of its own (docs/wire.md §5a).
            .header("authorization", "Bearer load")
            .body(())
            .map_err(|e| err(&e))?;
        let (resp, _) = client.send_request(req, true).map_err(|e| err(&e))?;
        pending.push(resp);
        client = client.ready().await.map_err(|e| err(&e))?;
    }
    let mut streams = Vec::with_capacity(n);
    for resp in pending {
        let resp = resp.await.map_err(|e| err(&e))?;
        if resp.status() != 200 {
            return Err(err(&format!("idle watch status {}", resp.status())));
        }
        streams.push(resp.into_body());
    }
    Ok((client, streams))
}
