//! The HTTP/1.1 client of the end-to-end tests: the one the stand-in crate
//! shares with its own tests and `bench/load` (`cborgate_standin::client`),
//! re-exported so tests say `support::http::…`.
#![allow(unused_imports)]

pub use cborgate_standin::client::*;
