//! The way in: client connections and what arrives on them, before a request is
//! the proxy's.
//!
//! - [`accept`]: the per-connection loop (pingora's `HttpProxy` in cborgate's own
//!   `ServerApp`), with the request read timeout;
//! - [`connections`]: how many connections are open, the limit, the head deadline;
//! - [`client_cert`]: client certificates on the TLS listener, and what they prove.

pub mod accept;
pub mod client_cert;
pub mod connections;
