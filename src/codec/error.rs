//! The closed set of reasons a transcoding can fail, each with the byte offset
//! in the input where it was found. The proxy answers a bad request body with a
//! 400 `Status` naming the reason and offset; a bad upstream body ends the response
//! abnormally (its status is already on its way, so no 502 can be sent). It uses
//! [`Reason::as_str`] as the bounded `reason` label of
//! `cborgate_transcode_errors_total`.

use std::fmt;

/// Why the input could not be transcoded. The set is closed so that it can be a
/// metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reason {
    /// The input ended in the middle of an item (or was empty).
    Truncated,
    /// The input is not well-formed JSON / CBOR.
    Syntax,
    /// Bytes follow the one data item of a single body.
    TrailingData,
    /// Nesting deeper than the configured limit.
    DepthExceeded,
    /// A CBOR text string that is not valid UTF-8.
    InvalidUtf8,
    /// The same map key twice (CBOR input; text and byte keys with equal bytes
    /// count as the same), or a duplicate JSON key whose first occurrence had
    /// already been streamed out.
    DuplicateKey,
    /// A JSON number outside the float64 range, or a CBOR integer outside int64.
    NumberOutOfRange,
    /// A JSON number literal longer than the configured limit.
    NumberTooLong,
    /// A string longer than the configured limit.
    StringTooLong,
    /// NaN or an infinity (CBOR input, any width).
    NanOrInfinity,
    /// A CBOR simple value other than false, true and null (including undefined).
    UnsupportedSimple,
    /// CBOR bignum tags 2 and 3.
    UnsupportedTag,
    /// A CBOR map key that is not a text or byte string.
    InvalidMapKey,
    /// Tag 0 or tag 1 content that is not a valid time.
    InvalidTime,
    /// A CBOR length that claims more bytes than the input holds.
    LengthExceedsInput,
    /// A text string where the schema has a `[]byte` field: Kubernetes decodes only byte
    /// strings there.
    TextForBytes,
    /// A byte string (untagged, or tagged 21 or 23) in a typed body whose field types are not
    /// known: its JSON depends on whether the field is `[]byte` or `string`.
    AmbiguousBytes,
    /// An untagged byte string in a `[]byte` field that is not base64 text as Go's
    /// `base64.StdEncoding` reads it: the CBOR-enabled server decodes it as such text
    /// (docs/wire.md §3). [`CodecError::detail`] is Go's offset in the string.
    InvalidBase64,
}

impl Reason {
    /// Every reason, so the metric's series can be created at zero from start-up.
    pub const ALL: [Reason; 18] = [
        Reason::Truncated,
        Reason::Syntax,
        Reason::TrailingData,
        Reason::DepthExceeded,
        Reason::InvalidUtf8,
        Reason::DuplicateKey,
        Reason::NumberOutOfRange,
        Reason::NumberTooLong,
        Reason::StringTooLong,
        Reason::NanOrInfinity,
        Reason::UnsupportedSimple,
        Reason::UnsupportedTag,
        Reason::InvalidMapKey,
        Reason::InvalidTime,
        Reason::LengthExceedsInput,
        Reason::TextForBytes,
        Reason::AmbiguousBytes,
        Reason::InvalidBase64,
    ];

    /// Bounded, stable label text.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Truncated => "truncated",
            Reason::Syntax => "syntax",
            Reason::TrailingData => "trailing_data",
            Reason::DepthExceeded => "depth_exceeded",
            Reason::InvalidUtf8 => "invalid_utf8",
            Reason::DuplicateKey => "duplicate_key",
            Reason::NumberOutOfRange => "number_out_of_range",
            Reason::NumberTooLong => "number_too_long",
            Reason::StringTooLong => "string_too_long",
            Reason::NanOrInfinity => "nan_or_infinity",
            Reason::UnsupportedSimple => "unsupported_simple_value",
            Reason::UnsupportedTag => "unsupported_tag",
            Reason::InvalidMapKey => "invalid_map_key",
            Reason::InvalidTime => "invalid_time",
            Reason::LengthExceedsInput => "length_exceeds_input",
            Reason::TextForBytes => "text_for_bytes",
            Reason::AmbiguousBytes => "ambiguous_bytes",
            Reason::InvalidBase64 => "invalid_base64",
        }
    }

    fn describe(self) -> &'static str {
        match self {
            Reason::Truncated => "unexpected end of input",
            Reason::Syntax => "malformed input",
            Reason::TrailingData => "unexpected data after the top-level item",
            Reason::DepthExceeded => "nesting exceeds the maximum depth",
            Reason::InvalidUtf8 => "text string is not valid UTF-8",
            Reason::DuplicateKey => "duplicate map key",
            Reason::NumberOutOfRange => "number is out of range",
            Reason::NumberTooLong => "number literal is too long",
            Reason::StringTooLong => "string is longer than the limit",
            Reason::NanOrInfinity => "floating-point NaN and infinities are not accepted",
            Reason::UnsupportedSimple => "only simple values false, true, and null are accepted",
            Reason::UnsupportedTag => "bignum tags are not accepted",
            Reason::InvalidMapKey => "map keys must be text or byte strings",
            Reason::InvalidTime => "invalid time value",
            Reason::LengthExceedsInput => "length exceeds the remaining input",
            Reason::TextForBytes => {
                "a text string where the field is bytes: send a byte string (tag 22 optional)"
            }
            Reason::AmbiguousBytes => {
                "a byte string in a field whose type is not known: send text, or a byte string tagged 22"
            }
            Reason::InvalidBase64 => {
                "an untagged byte string where the field is bytes must hold base64 text (or tag the raw bytes 22)"
            }
        }
    }
}

/// A transcoding failure: what went wrong and where.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CodecError {
    /// Offset in the input (counted from the first byte ever fed) at which the
    /// problem was detected.
    pub offset: u64,
    pub reason: Reason,
    /// For [`Reason::InvalidBase64`], the offset in the string Go's base64 decoder reports
    /// ("illegal base64 data at input byte N"); 0 otherwise.
    pub detail: u64,
}

impl CodecError {
    pub fn new(reason: Reason, offset: u64) -> Self {
        CodecError {
            offset,
            reason,
            detail: 0,
        }
    }

    /// [`Reason::InvalidBase64`] at `offset` of the input, Go's offset `at` in the string.
    pub fn invalid_base64(offset: u64, at: u64) -> Self {
        CodecError {
            detail: at,
            ..CodecError::new(Reason::InvalidBase64, offset)
        }
    }
}

impl fmt::Display for CodecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.reason == Reason::InvalidBase64 {
            return write!(
                f,
                "{}: illegal base64 data at input byte {}, at byte offset {}",
                self.reason.describe(),
                self.detail,
                self.offset
            );
        }
        write!(
            f,
            "{} at byte offset {}",
            self.reason.describe(),
            self.offset
        )
    }
}

impl std::error::Error for CodecError {}

#[cfg(test)]
mod tests {
    use super::Reason;

    #[test]
    fn all_lists_every_reason_once() {
        // No wildcard: a new variant stops this compiling until it has a
        // position here, and the assertion makes ALL agree with it.
        let position = |r: Reason| match r {
            Reason::Truncated => 0,
            Reason::Syntax => 1,
            Reason::TrailingData => 2,
            Reason::DepthExceeded => 3,
            Reason::InvalidUtf8 => 4,
            Reason::DuplicateKey => 5,
            Reason::NumberOutOfRange => 6,
            Reason::NumberTooLong => 7,
            Reason::StringTooLong => 8,
            Reason::NanOrInfinity => 9,
            Reason::UnsupportedSimple => 10,
            Reason::UnsupportedTag => 11,
            Reason::InvalidMapKey => 12,
            Reason::InvalidTime => 13,
            Reason::LengthExceedsInput => 14,
            Reason::TextForBytes => 15,
            Reason::AmbiguousBytes => 16,
            Reason::InvalidBase64 => 17,
        };
        for (i, r) in Reason::ALL.into_iter().enumerate() {
            assert_eq!(position(r), i, "{r:?}");
        }
    }
}
