//! cborgate: a transparent, negotiating reverse proxy that lets Kubernetes API
//! clients speak CBOR (KEP-4222) to apiservers that only speak JSON.
//!
//! - [`codec`]: sans-IO JSON ⇄ CBOR transcoding with Kubernetes' wire rules.
//! - [`negotiate`]: pure decisions, request head in, [`negotiate::Plan`] out.
//! - [`proxy`]: the pingora glue that carries a plan out; [`server`] assembles it and
//!   [`accept`] runs each connection (the request read timeout), within the limits of
//!   [`connections`] (how many, the head deadline); [`memory`] hands freed memory back
//!   after bursts.
//! - [`client_cert`]: client certificates on the TLS listener, and what they prove.
//! - [`admin`], [`metrics`], [`logs`], [`status`], [`config`]: operations surface.
//! - [`tools`], [`cli`], `demo` (feature `demo`, on by default): the commands.
//!   `demo` runs the kube-apiserver stand-in of the workspace crate
//!   `cborgate-standin` (`standin/`), which the tests also use.

/// The git commit this binary was built from (`build.rs`: `CBORGATE_GIT_COMMIT`, or
/// `git rev-parse`, or `unknown`).
pub const GIT_COMMIT: &str = env!("CBORGATE_GIT_COMMIT");

/// The version with its commit, as `--version` and the start-up line print it.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("CBORGATE_GIT_COMMIT"),
    ")"
);

pub mod accept;
pub mod admin;
pub mod admission;
pub mod budget;
pub mod cli;
pub mod client_cert;
pub mod codec;
pub mod config;
pub mod connections;
#[cfg(feature = "demo")]
pub mod demo;
pub mod logs;
pub mod memory;
pub mod metrics;
pub mod negotiate;
pub mod proxy;
pub mod reload;
pub mod server;
pub mod status;
pub mod sys;
pub mod tools;
