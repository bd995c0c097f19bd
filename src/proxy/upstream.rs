//! The upstream apiserver: how to reach it (peer, TLS, timeouts) and what is
//! known about whether it answers (for `/readyz`).

use crate::config::{Config, ConfigError, UpstreamUrl};
use pingora::http::RequestHeader;
use pingora::prelude::HttpPeer;
use pingora::Result;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Whether the upstream has been seen answering.
#[derive(Debug, Default)]
pub struct Readiness(AtomicU8);

const ANSWERING: u8 = 1;
const UNREACHABLE: u8 = 2;

impl Readiness {
    pub fn answered(&self) {
        self.0.store(ANSWERING, Ordering::Relaxed);
    }
    pub fn failed(&self) {
        self.0.store(UNREACHABLE, Ordering::Relaxed);
    }
    /// `Some(true)`: answered last time; `Some(false)`: unreachable; `None`: unknown.
    pub fn state(&self) -> Option<bool> {
        match self.0.load(Ordering::Relaxed) {
            ANSWERING => Some(true),
            UNREACHABLE => Some(false),
            _ => None,
        }
    }
}

pub struct Upstream {
    pub url: UpstreamUrl,
    /// Client certificate and key presented to the upstream, if configured.
    client_cert: Option<Arc<pingora::utils::tls::CertKey>>,
    connect_timeout: Duration,
    header_timeout: Duration,
    insecure: bool,
    pub readiness: Arc<Readiness>,
}

impl Upstream {
    pub fn new(config: &Config) -> Result<Self, ConfigError> {
        let client_cert = if config.upstream.client_cert.is_empty() {
            None
        } else {
            Some(Arc::new(load_cert_key(
                &config.upstream.client_cert,
                &config.upstream.client_key,
            )?))
        };
        Ok(Upstream {
            client_cert,
            url: UpstreamUrl::parse(&config.upstream.url)?,
            connect_timeout: Duration::from_millis(config.upstream.connect_timeout_ms),
            header_timeout: Duration::from_secs(config.upstream.response_header_timeout_seconds),
            insecure: config.upstream.insecure_skip_verify,
            readiness: Arc::new(Readiness::default()),
        })
    }

    /// A peer for one request. Long-running requests (watches, upgrades,
    /// followed logs) get no read timeout at all.
    pub fn peer(&self, long_running: bool) -> Box<HttpPeer> {
        let mut peer = HttpPeer::new(
            (self.url.host.as_str(), self.url.port),
            self.url.tls,
            self.url.host.clone(),
        );
        peer.options.connection_timeout = Some(self.connect_timeout);
        peer.options.read_timeout = if long_running {
            None
        } else {
            Some(self.header_timeout)
        };
        peer.client_cert_key = self.client_cert.clone();
        // pingora forwards only WebSocket upgrades by default; kubectl falls
        // back to SPDY/3.1 for exec, attach and port-forward, so keep any
        // upgrade handshake whole (this applies only when `Upgrade` is present).
        peer.options.http_upstream_request_policy.h1_upgrade =
            pingora::upstreams::peer::H1UpgradePolicy::Preserve;
        if self.insecure {
            peer.options.verify_cert = false;
            peer.options.verify_hostname = false;
        }
        Box::new(peer)
    }

    /// Keep the client's Host unless it is missing (HTTP/2 uses :authority).
    pub fn rewrite_host(&self, req: &mut RequestHeader) -> Result<()> {
        if req.headers.get("host").is_none() {
            let host = if self.url.host.contains(':') {
                format!("[{}]:{}", self.url.host, self.url.port)
            } else {
                format!("{}:{}", self.url.host, self.url.port)
            };
            req.insert_header("Host", host)?;
        }
        Ok(())
    }

    pub fn saw_response(&self) {
        self.readiness.answered();
    }

    pub fn saw_failure(&self) {
        self.readiness.failed();
    }
}

/// Read a PEM certificate chain and private key for the upstream connection.
fn load_cert_key(cert: &str, key: &str) -> Result<pingora::utils::tls::CertKey, ConfigError> {
    let bad = |why: String| {
        ConfigError(format!(
            "upstream.client_cert/client_key ({cert}, {key}): {why}"
        ))
    };
    match pingora::tls::load_certs_and_key_files(cert, key) {
        Ok(Some((certs, key))) => Ok(pingora::utils::tls::CertKey::new(
            certs.iter().map(|c| c.to_vec()).collect(),
            key.secret_der().to_vec(),
        )),
        Ok(None) => Err(bad("no certificate or no private key found".into())),
        Err(e) => Err(bad(e.to_string())),
    }
}
