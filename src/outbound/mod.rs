//! The way out, the counterpart of `inbound`: the upstream apiserver and what
//! cborgate knows of it.
//!
//! - [`upstream`]: reaching the upstream (its name resolved off the workers, the peer,
//!   TLS material, timeouts) and the readiness probe behind `/readyz`;
//! - [`failure`]: what went wrong on the way to the upstream, in an operator's words;
//! - [`capabilities`]: what `auto` mode has learned of the upstream, per (verb, group,
//!   resource).

pub mod capabilities;
pub mod failure;
pub mod upstream;
