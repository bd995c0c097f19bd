//! cborgate: a transparent, negotiating reverse proxy that lets Kubernetes API
//! clients speak CBOR (KEP-4222) to apiservers that only speak JSON.
//!
//! The folders are the rings, innermost first (ARCHITECTURE.md; `tests/architecture_map.rs`
//! checks the direction):
//!
//! - the floor: [`metrics`], every Prometheus family, which imports nothing of the crate
//!   so that every ring outside the pure core may count into it;
//! - the pure core: [`codec`] (sans-IO JSON ⇄ CBOR transcoding with Kubernetes' wire
//!   rules) and [`negotiate`] (pure decisions, request head in, [`negotiate::Plan`] out);
//! - what the glue leans on: [`config`], [`tls`] (certificates, keys, CA bundles),
//!   `limits` (admission, the body budget), `inbound` (connections and client
//!   certificates on the way in) and [`outbound`] (the upstream, on the way out);
//! - the glue: [`proxy`], the pingora callbacks that carry a plan out;
//! - the shell: [`ops`] (the admin listener, logs), [`process`] (start-up, the drain,
//!   reloading, memory) and [`commands`] (`serve`, `transcode`, `diag`, `demo`).
//!
//! Public are only the modules the tests, benchmarks and fuzz targets use.

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

pub mod codec;
pub mod commands;
pub mod config;
pub(crate) mod inbound;
pub(crate) mod limits;
pub mod metrics;
pub mod negotiate;
pub mod ops;
pub mod outbound;
pub mod process;
pub mod proxy;
pub mod tls;
