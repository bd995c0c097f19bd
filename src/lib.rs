//! cborgate: a transparent, negotiating reverse proxy that lets Kubernetes API
//! clients speak CBOR (KEP-4222) to apiservers that only speak JSON.
//!
//! - [`codec`]: sans-IO JSON ⇄ CBOR transcoding with Kubernetes' wire rules.
//! - [`tools`]: the offline commands `transcode` and `diag`.
//! - [`cli`]: the long-running commands `serve` and `demo`.

pub mod cli;
pub mod codec;
pub mod tools;
