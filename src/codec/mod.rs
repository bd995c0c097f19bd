//! The codec: sans-IO, incremental transcoding between JSON and CBOR with
//! Kubernetes' exact wire rules (`docs/wire.md` §2 and §3).
//!
//! Bytes go in, in pieces of any size (one byte is fine), and bytes come out as
//! soon as they can. Nothing here does I/O, is async, or knows about HTTP: the
//! proxy's body filters, the `transcode` command, the fuzz targets and the
//! benchmarks all drive the same two state machines, [`JsonToCbor`] and
//! [`CborToJson`].
//!
//! Invariants: no recursion on input depth (explicit stacks), no document
//! tree, no allocation sized by a length read from the input, every limit
//! configurable ([`Limits`]), and every failure a [`CodecError`] with a byte
//! offset and a [`Reason`] from a closed set.

mod base64;
mod breadth;
mod buf;
mod cbor_to_json;
pub mod diag;
mod error;
pub mod fields;
mod items;
mod json_text;
mod json_to_cbor;
mod keys;
mod number;
mod time;
mod utf8;

pub use breadth::{Breadth, BreadthScanner};
pub use cbor_to_json::CborToJson;
pub use error::{CodecError, Reason};
pub use items::ItemCounter;
pub use json_to_cbor::JsonToCbor;
pub use number::SELF_DESCRIBED;
pub use utf8::{go_lossy, Scan};

/// RFC 3339 text (UTC, Go's RFC3339Nano) for Unix seconds; `None` outside
/// years 0000–9999. Shared with the admin endpoints.
pub fn format_unix_time(secs: i64, out: &mut Vec<u8>) -> Option<()> {
    time::epoch_int_to_nano(secs as i128, out)
}

/// How JSON strings are written in CBOR (`codec.strings`, `--codec-strings`, and the
/// `transcode` command's `--strings`, read by serde and clap from the variants' names).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Default,
    serde::Deserialize,
    serde::Serialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
#[value(rename_all = "lowercase")]
pub enum StringMode {
    /// Byte strings (major type 2), as kube-apiserver writes them.
    #[default]
    Bytes,
    /// Text strings (major type 3), for non-Go clients.
    Text,
}

/// Bounds on what input may make the codec do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Maximum nesting of arrays, maps (and, for CBOR, tags); the top-level
    /// container is level 1, as Kubernetes counts.
    pub max_depth: usize,
    /// Maximum length of one string, in bytes.
    pub max_string_len: u64,
    /// Maximum length of one JSON number literal, in characters.
    pub max_number_len: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_depth: 10_000,
            max_string_len: 64 * 1024 * 1024,
            max_number_len: 1024,
        }
    }
}

/// Default streaming window: 1 MiB.
pub const DEFAULT_WINDOW: usize = 1024 * 1024;

/// Options for [`JsonToCbor`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JsonToCborOptions {
    pub strings: StringMode,
    /// Documents up to this many buffered bytes use definite lengths only;
    /// beyond it, open containers switch to indefinite length.
    pub window: usize,
    /// Input is a watch stream (JSON events separated by whitespace); each
    /// event becomes `55799({"type": …, "object": 55799(…)})`.
    pub watch: bool,
    /// Detect duplicate keys (last one wins, as in Go). A Go upstream never
    /// sends duplicates, so the response path may turn this off.
    pub dedupe_keys: bool,
    pub limits: Limits,
    /// Which fields of a response's objects are `[]byte` (docs/wire.md §2): their base64
    /// text becomes tag 22 and the bytes, as a CBOR-enabled server writes them.
    /// [`fields::Schema::Typed`] only; any other schema changes nothing.
    pub schema: fields::Schema,
}

impl Default for JsonToCborOptions {
    fn default() -> Self {
        JsonToCborOptions {
            strings: StringMode::Bytes,
            window: DEFAULT_WINDOW,
            watch: false,
            dedupe_keys: true,
            limits: Limits::default(),
            schema: fields::Schema::Unstructured,
        }
    }
}

/// Options for [`CborToJson`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CborToJsonOptions {
    /// Input is a CBOR Sequence (watch stream); each item becomes one line of
    /// JSON terminated by `\n`.
    pub sequence: bool,
    /// Reject duplicate map keys (byte and text keys with equal bytes count as
    /// duplicates).
    pub dedupe_keys: bool,
    /// Total input length, when known (e.g. from Content-Length): a length
    /// header claiming more than what remains is rejected at once.
    pub input_len: Option<u64>,
    pub limits: Limits,
    /// Which fields are `[]byte` (docs/wire.md §3, byte fields).
    pub schema: fields::Schema,
}

impl Default for CborToJsonOptions {
    fn default() -> Self {
        CborToJsonOptions {
            sequence: false,
            dedupe_keys: true,
            input_len: None,
            limits: Limits::default(),
            schema: fields::Schema::Unstructured,
        }
    }
}

/// The common shape of both directions, so callers can drive either.
pub trait Transcoder: Send + Sync {
    /// Feed the next piece of input; output produced so far is appended to `out`.
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError>;
    /// The input is complete.
    fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), CodecError>;
    /// Completed top-level items (watch events) so far.
    fn documents(&self) -> u64;
    /// Start over on new input, keeping allocated buffers.
    fn reset(&mut self);
}

impl Transcoder for JsonToCbor {
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        JsonToCbor::feed(self, input, out)
    }
    fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), CodecError> {
        JsonToCbor::finish(self, out)
    }
    fn documents(&self) -> u64 {
        JsonToCbor::documents(self)
    }
    fn reset(&mut self) {
        JsonToCbor::reset(self)
    }
}

impl Transcoder for CborToJson {
    fn feed(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), CodecError> {
        CborToJson::feed(self, input, out)
    }
    fn finish(&mut self, out: &mut Vec<u8>) -> Result<(), CodecError> {
        CborToJson::finish(self, out)
    }
    fn documents(&self) -> u64 {
        CborToJson::documents(self)
    }
    fn reset(&mut self) {
        CborToJson::reset(self)
    }
}

/// Transcode a whole JSON body at once.
pub fn json_to_cbor(input: &[u8], opts: JsonToCborOptions) -> Result<Vec<u8>, CodecError> {
    let mut t = JsonToCbor::new(opts);
    let mut out = Vec::with_capacity(input.len());
    t.feed(input, &mut out)?;
    t.finish(&mut out)?;
    Ok(out)
}

/// Transcode a whole CBOR body at once.
pub fn cbor_to_json(input: &[u8], opts: CborToJsonOptions) -> Result<Vec<u8>, CodecError> {
    let mut opts = opts;
    opts.input_len.get_or_insert(input.len() as u64);
    let mut t = CborToJson::new(opts);
    let mut out = Vec::with_capacity(input.len() + input.len() / 4);
    t.feed(input, &mut out)?;
    t.finish(&mut out)?;
    Ok(out)
}
