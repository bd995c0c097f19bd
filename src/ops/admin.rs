//! The admin listener: `/metrics` (Prometheus text), `/healthz` (the process
//! runs), `/readyz` (the upstream answered the last readiness probe, made every
//! two seconds over the same TLS and credentials as requests, and the process is
//! not draining) and `/debug/capabilities` (what `auto` mode has learned).
//! Never the proxy port.

use crate::limits::admission::Admission;
use crate::ops::metrics::metrics;
use crate::outbound::upstream::Readiness;
use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use std::sync::Arc;

pub struct Admin {
    pub readiness: Arc<Readiness>,
    pub capabilities: Arc<crate::outbound::capabilities::Capabilities>,
    pub admission: Arc<Admission>,
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
            "/debug/capabilities" => text(200, "application/json", self.capabilities.to_json()),
            "/readyz" if self.admission.is_draining() => {
                text(503, "text/plain; charset=utf-8", "shutting down")
            }
            "/readyz" => match self.readiness.get() {
                (true, _) => text(200, "text/plain; charset=utf-8", "ok"),
                (false, why) => text(503, "text/plain; charset=utf-8", format!("{why}\n")),
            },
            _ => text(404, "text/plain; charset=utf-8", "not found"),
        }
    }
}
