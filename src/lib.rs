//! cborgate: a transparent, negotiating reverse proxy that lets Kubernetes API
//! clients speak CBOR (KEP-4222) to apiservers that only speak JSON.
//!
//! - [`codec`]: sans-IO JSON ⇄ CBOR transcoding with Kubernetes' wire rules.
//! - [`negotiate`]: pure decisions, request head in, [`negotiate::Plan`] out.
//! - [`proxy`]: the pingora glue that carries a plan out; [`server`] assembles it and
//!   [`accept`] runs each connection (the request read timeout).
//! - [`admin`], [`metrics`], [`logs`], [`status`], [`config`]: operations surface.
//! - [`standin`]: a JSON-only kube-apiserver stand-in for `demo` and tests.
//! - [`tools`], [`cli`], [`demo`]: the commands.

pub mod accept;
pub mod admin;
pub mod admission;
pub mod cli;
pub mod codec;
pub mod config;
pub mod demo;
pub mod logs;
pub mod metrics;
pub mod negotiate;
pub mod proxy;
pub mod reload;
pub mod server;
pub mod standin;
pub mod status;
pub mod tools;
