//! End to end through the real `cborgate` binary, one test binary (each test
//! binary links pingora; one link instead of nine): listen addresses of both families,
//! the modes (`legacy`, `auto`, `upgrade`), the client-go scenario, faults, shared
//! HTTP/2 upstream connections and GOAWAY, identity, limits, logs, metric labels,
//! streams and TLS.
//! Each module in `tests/proxy/` says what it covers. The load test stays a
//! binary of its own (`tests/proxy_load.rs`): its latency and RSS bounds want the
//! machine to itself.

#[path = "../support/mod.rs"]
mod support;

mod addresses;
mod auto;
mod bodies;
mod client_scenario;
mod connections;
mod early_answer;
mod faults;
mod forwarded;
mod goaway;
mod identity;
mod legacy;
mod limits;
mod logs;
mod metrics_labels;
mod modes;
mod protect;
mod shutdown;
mod streams;
mod tls;
mod upstream;
