//! The floor under cborgate: pingora's own HTTP proxy with nothing in its callbacks but
//! the upstream, on the same pingora, the same build and the same worker threads as
//! `cborgate serve` (`server.threads`' default). The load harness runs it as an anchor beside haproxy and nginx
//! (`procs.rs`), so a run shows how much of a small request's cost is pingora's
//! per-request machinery, which no code of cborgate's can take away, and how much is
//! cborgate's own.
//!
//! `pingora-floor LISTEN UPSTREAM [CERT KEY]`: plain HTTP/1.1 on both sides, the
//! upstream's connections kept alive (pingora's default pool), the client sockets'
//! buffers as cborgate sets them (no read buffer; `server.write_buffer_bytes`' default
//! for the writes), no logging. With CERT and KEY (PEM files), the listener serves TLS
//! with pingora's own rustls settings (`TlsSettings::intermediate`): the floor under
//! cborgate's handshakes.

use async_trait::async_trait;
use pingora::listeners::tls::TlsSettings;
use pingora::listeners::{L4BufferSettings, ListenerConfig};
use pingora::prelude::*;
use pingora::server::configuration::{Opt, ServerConf};

struct Floor {
    upstream: String,
}

#[async_trait]
impl ProxyHttp for Floor {
    type CTX = ();

    fn new_ctx(&self) -> Self::CTX {}

    async fn upstream_peer(&self, _session: &mut Session, _ctx: &mut ()) -> Result<Box<HttpPeer>> {
        Ok(Box::new(HttpPeer::new(
            self.upstream.as_str(),
            false,
            String::new(),
        )))
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(listen), Some(upstream)) = (args.next(), args.next()) else {
        eprintln!("usage: pingora-floor LISTEN UPSTREAM [CERT KEY] (host:port, PEM files)");
        std::process::exit(2);
    };
    let tls = match (args.next(), args.next()) {
        (Some(cert), Some(key)) => {
            Some(TlsSettings::intermediate(&cert, &key).unwrap_or_else(|e| {
                eprintln!("pingora-floor: the TLS certificate or key: {e}");
                std::process::exit(1);
            }))
        }
        (None, None) => None,
        _ => {
            eprintln!("pingora-floor: CERT needs KEY");
            std::process::exit(2);
        }
    };
    let conf = ServerConf {
        threads: cborgate::config::ServerConfig::default().threads,
        ..ServerConf::default()
    };
    let mut server = Server::new_with_opt_and_conf(Some(Opt::default()), conf);
    server.bootstrap();
    let mut proxy = pingora::proxy::http_proxy_service(&server.configuration, Floor { upstream });
    let buffers = L4BufferSettings::default()
        .read(0)
        .write(cborgate::config::DEFAULT_WRITE_BUFFER_BYTES);
    let mut listener = ListenerConfig::tcp(&listen).l4_buffer(buffers);
    if let Some(tls) = tls {
        listener = listener.tls(tls);
    }
    proxy.add_listener(listener);
    server.add_service(proxy);
    server.run_forever();
}
