//! The process: start-up, its background services, and its end.
//!
//! - [`server`]: start-up checks, then the pingora server and its services;
//! - [`drain`]: SIGTERM, from failing `/readyz` to the exit;
//! - [`reload`]: certificates and keys read again when they change;
//! - [`memory`]: freed memory handed back after bursts;
//! - [`sys`]: the process's calls into the C library.

pub mod drain;
pub mod memory;
pub mod reload;
pub mod server;
pub mod sys;
