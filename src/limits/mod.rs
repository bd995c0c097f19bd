//! Capacity: what the process lets in at once, each share given back when dropped.
//!
//! - [`admission`]: requests in flight (short and long-running), the draining flag,
//!   and long-running requests' upstream sockets;
//! - [`budget`]: request body bytes held in memory, over all requests.

pub mod admission;
pub mod budget;
