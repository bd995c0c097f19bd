//! The admin listener: `/metrics` (Prometheus text), `/healthz` (the process
//! runs), `/readyz` (the upstream answers HTTP) and `/debug/capabilities`
//! (what `auto` mode has learned). Never the proxy port.

use crate::config::UpstreamUrl;
use crate::metrics::metrics;
use crate::proxy::upstream::Readiness;
use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub struct Admin {
    pub upstream: UpstreamUrl,
    pub readiness: Arc<Readiness>,
    pub capabilities: Arc<crate::proxy::capabilities::Capabilities>,
}

fn text(code: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Response<Vec<u8>> {
    let body = body.into();
    Response::builder()
        .status(code)
        .header("Content-Type", content_type)
        .header("Content-Length", body.len())
        .body(body)
        .unwrap_or_else(|_| Response::new(Vec::new()))
}

impl Admin {
    /// Ask the upstream for any HTTP answer: plain HTTP gets a real request;
    /// for TLS upstreams a TCP connection is the probe.
    async fn probe(&self) -> bool {
        let addr = (self.upstream.host.as_str(), self.upstream.port);
        let attempt = async {
            let mut s = tokio::net::TcpStream::connect(addr).await.ok()?;
            if self.upstream.tls {
                return Some(true);
            }
            let req = format!(
                "GET /readyz HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
                self.upstream.host
            );
            s.write_all(req.as_bytes()).await.ok()?;
            let mut buf = [0u8; 16];
            let n = s.read(&mut buf).await.ok()?;
            Some(buf[..n].starts_with(b"HTTP/1."))
        };
        let ok = tokio::time::timeout(Duration::from_secs(2), attempt)
            .await
            .ok()
            .flatten()
            .unwrap_or(false);
        if ok {
            self.readiness.answered();
        } else {
            self.readiness.failed();
        }
        ok
    }
}

#[async_trait]
impl ServeHttp for Admin {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let path = session.req_header().uri.path().to_string();
        match path.as_str() {
            "/metrics" => text(
                200,
                "text/plain; version=0.0.4; charset=utf-8",
                metrics().render(),
            ),
            "/healthz" | "/livez" => text(200, "text/plain; charset=utf-8", "ok"),
            "/debug/capabilities" => text(200, "application/json", self.capabilities.to_json()),
            "/readyz"
                if crate::server::SHUTTING_DOWN.load(std::sync::atomic::Ordering::Acquire) =>
            {
                text(503, "text/plain; charset=utf-8", "shutting down")
            }
            "/readyz" => {
                let ready = match self.readiness.state() {
                    Some(true) => true,
                    _ => self.probe().await,
                };
                if ready {
                    text(200, "text/plain; charset=utf-8", "ok")
                } else {
                    text(503, "text/plain; charset=utf-8", "upstream unreachable")
                }
            }
            _ => text(404, "text/plain; charset=utf-8", "not found"),
        }
    }
}
