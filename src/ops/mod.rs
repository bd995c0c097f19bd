//! Operations, the shell's face to an operator: what it reads and scrapes.
//!
//! - [`admin`]: the admin listener (`/metrics`, `/healthz`, `/readyz`,
//!   `/debug/capabilities`), handed what it reads at start-up;
//! - [`logs`]: logging set-up, and pingora's client-noise lines counted.
//!
//! The metric families themselves are the floor, `crate::metrics`.

pub mod admin;
pub mod logs;
pub mod request_lines;
