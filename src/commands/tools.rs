//! The offline commands `cborgate transcode` and `cborgate diag`: the codec
//! driven over a reader and a writer, with docs/surface.md's output rules, and the
//! hint added to an error when the input is plainly the other format.

use crate::codec::diag::{diagnose, BytesAs};
use crate::codec::{
    CborToJson, CborToJsonOptions, CodecError, JsonToCbor, JsonToCborOptions, Reason, StringMode,
    Transcoder, SELF_DESCRIBED,
};
use std::io::{self, Read, Write};

/// Direction of `transcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Cbor,
    Json,
}

/// Why a command failed: bad input (with the codec's reason and offset, and a
/// hint when the input looks like the other format) or I/O.
#[derive(Debug)]
pub enum ToolError {
    Input {
        error: CodecError,
        hint: Option<&'static str>,
    },
    Io(io::Error),
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Input { error, hint } => {
                write!(f, "invalid input: {error} ({})", error.reason.as_str())?;
                match hint {
                    Some(h) => write!(f, " ({h})"),
                    None => Ok(()),
                }
            }
            ToolError::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

/// The first bytes of an input after JSON whitespace (RFC 8259 §2), kept
/// while the input streams past so that an error can say what the input
/// looks like.
#[derive(Default)]
struct Head {
    bytes: [u8; 3],
    len: usize,
}

/// An input format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    Json,
    Cbor,
}

impl Head {
    fn see(&mut self, chunk: &[u8]) {
        for &b in chunk {
            if self.len == self.bytes.len() {
                return;
            }
            if self.len == 0 && matches!(b, b' ' | b'\t' | b'\n' | b'\r') {
                continue;
            }
            self.bytes[self.len] = b;
            self.len += 1;
        }
    }

    /// JSON if it opens an object, array or string (`{`, 0x7b, is also the
    /// CBOR head of a text string with an 8-byte length, so a CBOR reader
    /// fails on it with a misleading reason such as "string is longer than the
    /// limit"). CBOR if it starts with the self-described tag that starts
    /// the bodies cborgate writes (docs/wire.md §2), or with a byte no JSON text
    /// can start with and no text editor writes: a control character or a
    /// byte >= 0x80 other than a UTF-8 byte order mark.
    fn looks(&self) -> Option<Format> {
        let head = &self.bytes[..self.len];
        match head.first() {
            Some(b'{' | b'[' | b'"') => Some(Format::Json),
            _ if head == SELF_DESCRIBED => Some(Format::Cbor),
            Some(&b) if b < 0x20 || b == 0x7f => Some(Format::Cbor),
            Some(&b) if b >= 0x80 && !b"\xef\xbb\xbf".starts_with(head) => Some(Format::Cbor),
            _ => None,
        }
    }
}

/// A codec error from reading `reads`, with a hint if `head` looks like the
/// other format. `json_hint` is what to say when CBOR was expected and JSON
/// came (it names the command to use instead).
fn input_error(
    error: CodecError,
    head: &Head,
    reads: Format,
    json_hint: &'static str,
) -> ToolError {
    let hint = match (reads, head.looks()) {
        (Format::Cbor, Some(Format::Json)) => Some(json_hint),
        (Format::Json, Some(Format::Cbor)) => Some("the input looks like CBOR; use --to json"),
        _ => None,
    };
    ToolError::Input { error, hint }
}

impl From<io::Error> for ToolError {
    fn from(e: io::Error) -> Self {
        ToolError::Io(e)
    }
}

/// Transcode `input` to `output`. A single body is written only once it is
/// known to be good; a watch stream is written event by event.
///
/// `terminal` says that `output` is a terminal: then JSON output that does not
/// already end in a newline gets one, so that the shell prompt starts on its
/// own line. Otherwise the bytes are exactly the codec's (pipes and files).
pub fn transcode(
    input: &mut dyn Read,
    output: &mut dyn Write,
    to: Target,
    watch: bool,
    strings: StringMode,
    terminal: bool,
) -> Result<(), ToolError> {
    let mut t: Box<dyn Transcoder> = match to {
        Target::Cbor => Box::new(JsonToCbor::new(JsonToCborOptions {
            watch,
            strings,
            ..Default::default()
        })),
        Target::Json => Box::new(CborToJson::new(CborToJsonOptions {
            sequence: watch,
            ..Default::default()
        })),
    };
    // `--to cbor` reads JSON and `--to json` reads CBOR.
    let reads = match to {
        Target::Cbor => Format::Json,
        Target::Json => Format::Cbor,
    };
    let bad =
        |e, head: &Head| input_error(e, head, reads, "the input looks like JSON; use --to cbor");
    let mut head = Head::default();
    let mut buf = vec![0u8; READ_BYTES];
    let mut out = Vec::new();
    // A single body's output so far, in pieces of about `PIECE_BYTES`: one
    // growing buffer would be moved to a new allocation at every doubling
    // (a copy of everything so far, and its pages faulted in anew).
    let mut pieces: Vec<Vec<u8>> = Vec::new();
    let mut last = None;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        head.see(&buf[..n]);
        let r = t.feed(&buf[..n], &mut out);
        last = out.last().copied().or(last);
        if watch {
            output.write_all(&out)?;
            out.clear();
        } else if out.len() >= PIECE_BYTES {
            let next = Vec::with_capacity(PIECE_BYTES + 2 * READ_BYTES);
            pieces.push(std::mem::replace(&mut out, next));
        }
        r.map_err(|e| bad(e, &head))?;
    }
    t.finish(&mut out).map_err(|e| bad(e, &head))?;
    last = out.last().copied().or(last);
    if terminal && to == Target::Json && last.is_some_and(|b| b != b'\n') {
        out.push(b'\n');
    }
    for piece in &pieces {
        output.write_all(piece)?;
    }
    output.write_all(&out)?;
    output.flush()?;
    Ok(())
}

/// The size of `transcode`'s reads.
const READ_BYTES: usize = 64 * 1024;
/// About the size of the pieces a single body's output is kept in.
const PIECE_BYTES: usize = 1 << 20;

/// Print CBOR (a single item or a sequence) in diagnostic notation.
///
/// An empty input is an error, as it is for `transcode`: RFC 8742 allows an
/// empty CBOR Sequence, but an empty capture is far likelier than an empty
/// sequence, and printing nothing with status 0 hides it.
pub fn diag(input: &mut dyn Read, output: &mut dyn Write, text: bool) -> Result<(), ToolError> {
    let mut data = Vec::new();
    input.read_to_end(&mut data)?;
    let mut head = Head::default();
    head.see(&data);
    let bad = |e| {
        input_error(
            e,
            &head,
            Format::Cbor,
            "the input looks like JSON; diag reads CBOR: convert it with transcode --to cbor first",
        )
    };
    if data.is_empty() {
        return Err(bad(CodecError::new(Reason::Truncated, 0)));
    }
    let bytes_as = if text {
        BytesAs::TextWhereValid
    } else {
        BytesAs::Hex
    };
    let s = diagnose(&data, bytes_as, crate::codec::Limits::default().max_depth).map_err(bad)?;
    output.write_all(s.as_bytes())?;
    Ok(())
}
