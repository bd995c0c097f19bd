//! `cborgate demo`: the built-in JSON-only apiserver stand-in on loopback with
//! the proxy (legacy mode) in front of it, and a few `curl` lines that show
//! CBOR working. Serves until interrupted.

use crate::config::{Config, UpstreamMode};
use cborgate_standin::{StandIn, StandInOptions};
use clap::Args;
use std::process::ExitCode;

/// `cborgate demo`'s flags.
#[derive(Args, Default)]
pub struct DemoArgs {
    /// Proxy listen address.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub listen: String,
    /// Stand-in apiserver listen address (not 8001, `kubectl proxy`'s default).
    #[arg(long, default_value = "127.0.0.1:8002")]
    pub standin: String,
    /// Admin listen address.
    #[arg(long, default_value = "127.0.0.1:9464")]
    pub admin: String,
}

pub fn run(args: DemoArgs) -> ExitCode {
    let standin_addr = match crate::config::listen_addr(&args.standin) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("cborgate: --standin: {e}");
            return ExitCode::from(2);
        }
    };
    // The stand-in runs on its own runtime thread; the proxy owns the main thread.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = match tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
        {
            Ok(rt) => rt,
            Err(e) => {
                let _ = tx.send(Err(e.to_string()));
                return;
            }
        };
        rt.block_on(async move {
            match StandIn::start(standin_addr, StandInOptions::default()).await {
                Ok(s) => {
                    let _ = tx.send(Ok(s.addr()));
                    std::future::pending::<()>().await;
                    drop(s);
                }
                Err(e) => {
                    let _ = tx.send(Err(e.to_string()));
                }
            }
        });
    });
    let upstream = match rx.recv() {
        Ok(Ok(a)) => a,
        Ok(Err(e)) => {
            eprintln!(
                "cborgate: the stand-in apiserver could not start on {standin_addr}: {e} \
                 (choose another address with --standin)"
            );
            return ExitCode::from(1);
        }
        Err(_) => {
            eprintln!("cborgate: the stand-in apiserver thread stopped");
            return ExitCode::from(1);
        }
    };
    let mut config = Config::default();
    config.server.listen = args.listen.clone();
    config.server.admin = args.admin.clone();
    config.upstream.url = format!("http://{upstream}");
    config.upstream.mode = UpstreamMode::Legacy;
    let log = crate::ops::logs::init(&config.log);
    let requests = crate::ops::request_lines::RequestLines::of(&log);
    let logs = log.flush;
    // Bind-check and load everything before printing: the lines must never be
    // printed for a proxy that is not there (or for whatever owns the port).
    let built = match config
        .check(None)
        .and_then(|c| crate::process::server::build(c, requests))
    {
        Ok(b) => b,
        Err(e) => {
            eprintln!("cborgate: {e}");
            return ExitCode::from(2);
        }
    };
    // The printed lines call this very executable, so they work as printed.
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "cborgate".to_string());
    let p = &args.listen;
    println!(
        "cborgate demo\n\
         \n  stand-in apiserver (JSON only): http://{upstream}\
         \n  cborgate proxy (legacy mode):   http://{p}\
         \n  metrics:                        http://{admin}/metrics\
         \n\nTry (each line works as printed):\n\
         \n  curl -s -H 'Accept: application/cbor' http://{p}/api/v1/namespaces/demo/configmaps/demo-config | {exe} diag --text\
         \n  curl -s -H 'Accept: application/json' http://{p}/api/v1/namespaces/demo/configmaps/demo-config\
         \n  echo '{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"from-cbor\"}},\"data\":{{\"k\":\"v\"}}}}' | {exe} transcode --to cbor | curl -s -X POST -H 'Content-Type: application/cbor' -H 'Accept: application/cbor' --data-binary @- http://{p}/api/v1/namespaces/demo/configmaps | {exe} diag --text\
         \n  curl -s -H 'Accept: application/cbor' 'http://{p}/api/v1/namespaces/demo/configmaps?watch=1&timeoutSeconds=2' | {exe} diag --text\
         \n  curl -s -X PATCH -H 'Content-Type: application/merge-patch+cbor' http://{p}/api/v1/namespaces/demo/configmaps/demo-config\
         \n  curl -s http://{admin}/metrics | grep ^cborgate_requests_total\
         \n\nCtrl-C stops.",
        admin = args.admin
    );
    crate::process::server::run(built, logs)
}
