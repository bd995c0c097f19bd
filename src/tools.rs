//! The offline commands `cborgate transcode` and `cborgate diag`: the codec
//! driven over a reader and a writer, with SURFACE.md's output rules.

use crate::codec::diag::{diagnose, BytesAs};
use crate::codec::{
    CborToJson, CborToJsonOptions, CodecError, JsonToCbor, JsonToCborOptions, StringMode,
    Transcoder,
};
use std::io::{self, Read, Write};

/// Direction of `transcode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Cbor,
    Json,
}

/// Why a command failed: bad input (with the codec's reason and offset) or I/O.
#[derive(Debug)]
pub enum ToolError {
    Input(CodecError),
    Io(io::Error),
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Input(e) => write!(f, "invalid input: {e} ({})", e.reason.as_str()),
            ToolError::Io(e) => write!(f, "i/o error: {e}"),
        }
    }
}

impl From<io::Error> for ToolError {
    fn from(e: io::Error) -> Self {
        ToolError::Io(e)
    }
}

/// Transcode `input` to `output`. A single body is written only once it is
/// known to be good; a watch stream is written event by event.
pub fn transcode(
    input: &mut dyn Read,
    output: &mut dyn Write,
    to: Target,
    watch: bool,
    strings: StringMode,
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
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        };
        let r = t.feed(&buf[..n], &mut out);
        if watch {
            output.write_all(&out)?;
            out.clear();
        }
        r.map_err(ToolError::Input)?;
    }
    t.finish(&mut out).map_err(ToolError::Input)?;
    output.write_all(&out)?;
    output.flush()?;
    Ok(())
}

/// Print CBOR (a single item or a sequence) in diagnostic notation.
pub fn diag(input: &mut dyn Read, output: &mut dyn Write, text: bool) -> Result<(), ToolError> {
    let mut data = Vec::new();
    input.read_to_end(&mut data)?;
    let bytes_as = if text {
        BytesAs::TextWhereValid
    } else {
        BytesAs::Hex
    };
    let s = diagnose(&data, bytes_as, crate::codec::Limits::default().max_depth)
        .map_err(ToolError::Input)?;
    output.write_all(s.as_bytes())?;
    Ok(())
}
