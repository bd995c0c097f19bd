//! Negotiation: every decision cborgate makes about a request before a byte of its body
//! moves (docs/wire.md §1, §4, §5). A request head goes in, a [`Plan`] comes out; nothing here
//! does I/O, blocks, or depends on anything but `std`, and no input can make it panic.
//!
//! - [`media`]: `Accept` negotiation exactly as a CBOR-enabled kube-apiserver 1.36 does it
//!   (goautoneg parsing and sort, then `NegotiateMediaTypeOptions`), `Content-Type`, and the
//!   bounded [`Format`] label; Go's float parsing (`go_float.rs`) and `sort.Sort` (`go_sort.rs`)
//!   are ported beside it so that `q` values and clause order match the apiserver's.
//! - [`route`]: what the path addresses (resource, group-version discovery, other discovery,
//!   anything else), the API group and resource, and the verb label of
//!   `apiserver_request_total`.
//! - [`plan`]: the decision table and the upstream modes; one test per row of docs/wire.md §1.
//! - [`byte_fields`]: which fields of a built-in kind are bytes, for a CBOR body's JSON.
//! - [`auto`]: `auto` mode's CBOR-first body and `Accept`, from what was learned.
//! - [`local`]: the Statuses cborgate answers itself outside the `Accept` table (limits,
//!   admission, a bad body, failures on the way to the upstream).
//! - [`encoding`]: whether a transcoded response is gzipped, as the apiserver does it.
//! - [`response`]: what to do with the upstream's response head (transcode, pass
//!   through, replay after a 415), what it teaches, and the format label.
//! - [`identity`]: who the request is (client certificate, trusted front proxy, nobody)
//!   and which identity headers are removed from or added to the upstream request.
//! - [`forwarded`]: the `X-Forwarded-For` line upstream (append the client, or replace).
//! - [`upstream_cbor`]: upgrade mode: whether an answer shows the upstream refuses CBOR
//!   (or speaks it), for `/readyz`.
//! - [`client`]: which client a request comes from (`User-Agent`): a bounded family and
//!   its Kubernetes version.
//! - [`labels`]: the `group`, `resource` and `client` labels of a request's metrics.
//! - [`protect`]: which clients decode CBOR with client-go 1.32–1.35's limits, and
//!   whether an answer to them is held until its width is known (docs/wire.md §2b).
//! - [`hold`]: the hold's state machine: read on or let the held start go (as CBOR or
//!   as the upstream's JSON), and whether a failed send is sent again.
//! - [`pool`]: which upstream connections a request may share (anonymous requests get
//!   their own), and whether a failed attempt is sent again.

pub mod auto;
pub mod byte_fields;
pub mod client;
pub mod encoding;
pub mod forwarded;
mod go_float;
mod go_sort;
pub mod head_lines;
pub mod hold;
pub mod identity;
pub mod intake;
pub mod labels;
pub mod local;
pub mod media;
pub mod plan;
pub mod pool;
pub mod protect;
pub mod response;
pub mod route;
pub mod upstream_cbor;

pub use auto::{CapabilityKey, Learned};
pub use intake::{AdmissionClass, BodyProgress, HeadFacts, HeadRefusal, Intake};
pub use local::{Failure, Reply, RequestLimits};
pub use media::Format;
pub use plan::{
    plan, plan_with, BodyAction, LocalReply, Plan, RequestHead, ResponseAction, UpstreamMode,
};
pub use response::{ClientFraming, OnResponse, Relabel, ResponseHead};
pub use route::{ResourceRoute, Route};
pub use upstream_cbor::CborSupport;
