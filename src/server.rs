//! Assembles and runs the pingora server: the proxy service (plain or TLS
//! with h2 + http/1.1 ALPN) and the admin service, with graceful shutdown on
//! SIGTERM (stop accepting, let requests finish within the grace period).

use crate::admin::Admin;
use crate::config::{Config, ConfigError};
use crate::proxy::Gate;
use pingora::server::configuration::{Opt, ServerConf};
use pingora::server::Server;
use pingora::services::listening::Service;
use std::sync::Arc;

/// Build the server. Errors are configuration problems (exit status 2).
pub fn build(config: Config) -> Result<Server, ConfigError> {
    config.validate()?;
    let config = Arc::new(config);
    let conf = ServerConf {
        threads: config.server.threads,
        grace_period_seconds: Some(0),
        graceful_shutdown_timeout_seconds: Some(config.server.grace_period_seconds),
        ca_file: (!config.upstream.ca_file.is_empty()).then(|| config.upstream.ca_file.clone()),
        ..ServerConf::default()
    };
    let opt = Opt::default();
    let mut server = Server::new_with_opt_and_conf(Some(opt), conf);
    server.bootstrap();

    let gate = Gate::new(config.clone())?;
    let admin = Admin {
        upstream: crate::config::UpstreamUrl::parse(&config.upstream.url)?,
        readiness: gate.readiness(),
    };
    let mut proxy = pingora::proxy::http_proxy_service(&server.configuration, gate);
    if config.server.tls_cert.is_empty() {
        proxy.add_tcp(&config.server.listen);
    } else {
        let mut tls = pingora::listeners::tls::TlsSettings::intermediate(
            &config.server.tls_cert,
            &config.server.tls_key,
        )
        .map_err(|e| ConfigError(format!("server.tls_cert/tls_key: {e}")))?;
        tls.enable_h2();
        proxy.add_tls_with_settings(&config.server.listen, None, tls);
    }
    let mut admin_service = Service::new("cborgate admin".to_string(), admin);
    admin_service.add_tcp(&config.server.admin);
    server.add_service(proxy);
    server.add_service(admin_service);
    Ok(server)
}
