//! The admin listener: `/metrics` (Prometheus text), `/healthz` (the process
//! runs), `/readyz` (the upstream answered the last readiness probe, made every
//! 5 s while ready and 2 s while not, over the same TLS and credentials as requests, and the process is
//! not draining) and `/debug/capabilities` (what `auto` mode has learned).
//! Never the proxy port. What it reads is handed in at start-up (`process::server`
//! wires the probe's verdict, the drain and `auto` mode's capabilities), not imported
//! from the rings it reports on.

use crate::metrics::metrics;
use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use std::sync::Arc;

/// `/readyz`'s answer now: ready, or the words of why not (the body of the 503).
pub type Ready = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

/// `/debug/capabilities`' JSON now.
pub type Shown = Arc<dyn Fn() -> String + Send + Sync>;

pub struct Admin {
    pub ready: Ready,
    pub capabilities: Shown,
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
            "/debug/capabilities" => text(200, "application/json", (self.capabilities)()),
            "/readyz" => match (self.ready)() {
                Ok(()) => text(200, "text/plain; charset=utf-8", "ok"),
                Err(why) => text(503, "text/plain; charset=utf-8", why),
            },
            _ => text(404, "text/plain; charset=utf-8", "not found"),
        }
    }
}
