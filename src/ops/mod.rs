//! Operations: what an operator reads and scrapes.
//!
//! - [`admin`]: the admin listener (`/metrics`, `/healthz`, `/readyz`,
//!   `/debug/capabilities`);
//! - [`metrics`]: every Prometheus family, defined once;
//! - [`logs`]: logging set-up, and pingora's client-noise lines counted.

pub mod admin;
pub mod logs;
pub mod metrics;
pub mod request_labels;
