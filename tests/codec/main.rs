//! The codec against recorded and generated data, one test binary (each test
//! binary links pingora through the library): the recorded corpus, Go's test
//! vectors, property tests and regressions. Each module in `tests/codec/`
//! says what it covers. `codec_alloc_guard.rs` and `codec_hostile.rs` stay
//! binaries of their own: each installs a counting global allocator, which would
//! count every other test's allocations here.

#[path = "../support/mod.rs"]
mod support;

mod byte_fields;
mod corpus;
mod props;
mod regressions;
mod vectors;
