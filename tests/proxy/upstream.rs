//! The small TLS upstream `early_answer` and `goaway` put behind cborgate, each with
//! its own HTTP/2 and HTTP/1.1 servers: the listener on loopback, with a CA made for
//! the test, that hands every connection to one of them by ALPN, and the pieces both
//! use to read a request and write a JSON answer. Its accept loop ([`serve_tls`]) also
//! serves the TLS upstreams of `tls` and `identity`.

use crate::support::harness::Harness;
use crate::support::pki::{provider, Ca};
use std::future::Future;
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// A connection the upstream accepted.
pub type Tls = tokio_rustls::server::TlsStream<tokio::net::TcpStream>;

/// A running upstream.
pub struct Upstream<S> {
    pub addr: std::net::SocketAddr,
    /// What it sees.
    pub seen: Arc<S>,
    /// The CA that signed its certificate, made for the test.
    pub ca: Ca,
    /// The runtime it runs on: it stops with it.
    pub rt: tokio::runtime::Runtime,
}

impl<S> Upstream<S> {
    /// cborgate in `mode` in front of the upstream, trusting its CA.
    pub fn cborgate(&self, mode: &str) -> Harness {
        Harness::proxy_to(
            &format!("https://127.0.0.1:{}", self.addr.port()),
            mode,
            &["--upstream-ca", &self.ca.path],
        )
    }
}

/// Start the upstream on loopback for the test `tag`, with a CA of its own and a
/// server certificate `cert` (as `<cert>.crt` beside the CA's), offering `h2` and
/// `http/1.1` (ALPN): a connection that chose `h2` goes to `serve_h2`, any other to
/// `serve_h1`, both with what the upstream sees.
pub fn start<S, H2, F2, H1, F1>(tag: &str, cert: &str, serve_h2: H2, serve_h1: H1) -> Upstream<S>
where
    S: Default + Send + Sync + 'static,
    H2: Fn(Tls, Arc<S>) -> F2 + Copy + Send + 'static,
    F2: Future<Output = ()> + Send + 'static,
    H1: Fn(Tls, Arc<S>) -> F1 + Copy + Send + 'static,
    F1: Future<Output = ()> + Send + 'static,
{
    let dir = std::env::temp_dir().join(format!("cborgate-{tag}-{}", std::process::id()));
    let ca = Ca::new(&dir, "ca");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let leaf = ca.server(cert);
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der], leaf.key)
        .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let seen = Arc::new(S::default());
    let s = seen.clone();
    let addr = serve_tls(&rt, acceptor, move |tls| {
        let seen = s.clone();
        async move {
            if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
                serve_h2(tls, seen).await;
            } else {
                serve_h1(tls, seen).await;
            }
        }
    });
    Upstream { addr, seen, ca, rt }
}

/// Listen on loopback on `rt`, and hand every connection `acceptor` accepts to `serve`
/// in a task of its own; a connection whose handshake fails is dropped. The listener's
/// address.
pub fn serve_tls<F, Fut>(
    rt: &tokio::runtime::Runtime,
    acceptor: tokio_rustls::TlsAcceptor,
    serve: F,
) -> std::net::SocketAddr
where
    F: Fn(Tls) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let (acceptor, serve) = (acceptor.clone(), serve.clone());
            tokio::spawn(async move {
                if let Ok(tls) = acceptor.accept(tcp).await {
                    serve(tls).await;
                }
            });
        }
    });
    addr
}

/// Answer an HTTP/2 request with `status` and the JSON `body`, which ends the stream's
/// sending half.
pub fn answer_h2(respond: &mut h2::server::SendResponse<bytes::Bytes>, status: u16, body: Vec<u8>) {
    let resp = http::Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(())
        .unwrap();
    if let Ok(mut send) = respond.send_response(resp, false) {
        let _ = send.send_data(body.into(), true);
    }
}

/// An HTTP/1.1 request, its body read whole.
pub struct H1Request {
    pub method: String,
    /// The request target, query included.
    pub target: String,
    /// The header fields, names in lower case, in the order they came.
    headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl H1Request {
    /// The value of the header field `name` (lower case): the last one, when it came
    /// more than once.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The next HTTP/1.1 request on `io`, with its `Content-Length` bytes of body (none
/// without one); `None` once the connection ends, or breaks off inside a request.
pub async fn read_h1(io: &mut (impl AsyncBufRead + Unpin)) -> Option<H1Request> {
    let mut line = String::new();
    if io.read_line(&mut line).await.unwrap_or(0) == 0 {
        return None;
    }
    let mut words = line.split_whitespace();
    let method = words.next().unwrap_or_default().to_string();
    let target = words.next().unwrap_or_default().to_string();
    let (mut len, mut headers) = (0usize, Vec::new());
    loop {
        let mut h = String::new();
        if io.read_line(&mut h).await.unwrap_or(0) == 0 {
            return None;
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (name, value) = h.split_once(':').unwrap_or((h, ""));
        let (name, value) = (name.to_ascii_lowercase(), value.trim().to_string());
        if name == "content-length" {
            len = value.parse().unwrap_or(0);
        }
        headers.push((name, value));
    }
    let mut body = vec![0; len];
    io.read_exact(&mut body).await.ok()?;
    Some(H1Request {
        method,
        target,
        headers,
        body,
    })
}

/// Answer an HTTP/1.1 request with `status` and the JSON `body`; whether it all went
/// out.
pub async fn answer_h1(out: &mut (impl AsyncWrite + Unpin), status: u16, body: &[u8]) -> bool {
    let head = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    out.write_all(head.as_bytes()).await.is_ok()
        && out.write_all(body).await.is_ok()
        && out.flush().await.is_ok()
}
