//! Field schemas for CBOR request bodies (docs/wire.md §3, byte fields): which paths of a
//! body hold Go `[]byte` (`format: byte` in the OpenAPI schema), and the bookkeeping that
//! finds those paths while the body streams.
//!
//! A CBOR-enabled kube-apiserver decodes a byte string in a `[]byte` field as its bytes,
//! whatever expected-encoding tag (21, 22, 23) it carries, and refuses a text string there
//! (issue 19, item 5: `binaryData: {"b": 23(h'0001fffe')}` is stored as `00 01 ff fe`).
//! In a `string` field it keeps the tag's text form (fxamacker/cbor's
//! `ByteStringToStringAllowedWithExpectedLaterEncoding`, docs/wire.md §3's table). The JSON
//! a legacy server reads must therefore depend on the field's Go type, which only a schema
//! can tell. A schema is a short list of paths; matching is a bit mask per open container,
//! so it costs no allocation beyond one byte per nesting level.

/// One step of a path from the top of a body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The map value under exactly this key (Kubernetes matches field names case-sensitively).
    Key(&'static str),
    /// The value under any key of a map (`map[string][]byte`).
    AnyKey,
    /// Any element of an array.
    AnyIndex,
}

/// What is known about the Go types behind a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Schema {
    /// Decoded into `map[string]interface{}` (custom resources, apply patches): no field is
    /// `[]byte`; docs/wire.md §3's table applies as it stands.
    #[default]
    Unstructured,
    /// A built-in kind whose `[]byte` fields are exactly these paths (at most 8; often none).
    Typed(&'static [&'static [Step]]),
    /// A typed body whose fields cborgate does not know: a byte string whose meaning depends
    /// on its field's type (untagged, or tagged 21 or 23) is refused rather than guessed.
    /// Tag 22 is safe either way: its base64 text is what a `string` field keeps and what a
    /// legacy server decodes a `[]byte` field from.
    Unknown,
}

/// The most paths a typed schema may list: one bit each.
pub const MAX_PATHS: usize = 8;

/// Where a value sits, as far as the schema cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Position {
    /// Paths whose steps so far match the way to this value.
    pub mask: u8,
    /// A path ends here: the value is a `[]byte` field.
    pub bytes: bool,
}

impl Position {
    /// The top-level item: every path is still possible.
    pub fn top(schema: Schema) -> Position {
        let mask = match schema {
            Schema::Typed(paths) => {
                debug_assert!(paths.len() <= MAX_PATHS);
                ((1u16 << paths.len().min(MAX_PATHS)) - 1) as u8
            }
            _ => 0,
        };
        Position { mask, bytes: false }
    }

    /// The position of a child of the container at `self`, which is at `depth` (the top
    /// item is depth 0), reached through `key` (`None`: an array element, or a key that
    /// names no field, such as one that was tagged).
    pub fn child(self, schema: Schema, depth: usize, key: Option<&[u8]>, array: bool) -> Position {
        let Schema::Typed(paths) = schema else {
            return Position {
                mask: 0,
                bytes: false,
            };
        };
        let mut mask = 0u8;
        let mut bytes = false;
        for (bit, path) in paths.iter().enumerate().take(MAX_PATHS) {
            if self.mask & (1 << bit) == 0 {
                continue;
            }
            let Some(step) = path.get(depth) else {
                continue;
            };
            let matches = match (step, array) {
                (Step::AnyIndex, true) => true,
                (Step::AnyKey, false) => true,
                (Step::Key(name), false) => key == Some(name.as_bytes()),
                _ => false,
            };
            if matches {
                if path.len() == depth + 1 {
                    bytes = true;
                } else {
                    mask |= 1 << bit;
                }
            }
        }
        Position { mask, bytes }
    }
}

/// The longest map key kept for matching field names; longer keys match no field.
pub(crate) const MAX_FIELD_NAME: usize = 32;

#[cfg(test)]
mod tests {
    use super::*;

    const CM: &[&[Step]] = &[&[Step::Key("binaryData"), Step::AnyKey]];
    const HOOKS: &[&[Step]] = &[
        &[
            Step::Key("webhooks"),
            Step::AnyIndex,
            Step::Key("clientConfig"),
            Step::Key("caBundle"),
        ],
        &[Step::Key("spec"), Step::Key("request")],
    ];

    #[test]
    fn paths_are_followed_step_by_step() {
        let s = Schema::Typed(CM);
        let top = Position::top(s);
        let bd = top.child(s, 0, Some(b"binaryData"), false);
        assert_eq!(
            bd,
            Position {
                mask: 1,
                bytes: false
            }
        );
        assert!(bd.child(s, 1, Some(b"anything"), false).bytes);
        // Under an array, or one level deeper, it no longer applies.
        assert!(!bd.child(s, 1, None, true).bytes);
        let v = bd.child(s, 1, Some(b"k"), false);
        assert_eq!(
            v.child(s, 2, Some(b"x"), false),
            Position {
                mask: 0,
                bytes: false
            }
        );
        // Other keys, a prefix, another case, a tagged key: nothing.
        for k in [&b"data"[..], b"binaryDat", b"BinaryData"] {
            assert_eq!(top.child(s, 0, Some(k), false).mask, 0, "{k:?}");
        }
        assert_eq!(top.child(s, 0, None, false).mask, 0);
    }

    #[test]
    fn several_paths_share_prefixes_and_arrays() {
        let s = Schema::Typed(HOOKS);
        let top = Position::top(s);
        assert_eq!(top.mask, 0b11);
        let w = top.child(s, 0, Some(b"webhooks"), false);
        assert_eq!(w.mask, 0b01);
        let e = w.child(s, 1, None, true);
        let cc = e.child(s, 2, Some(b"clientConfig"), false);
        assert!(cc.child(s, 3, Some(b"caBundle"), false).bytes);
        assert!(!cc.child(s, 3, Some(b"url"), false).bytes);
        // The map under `webhooks` is not an array: no match.
        assert_eq!(w.child(s, 1, Some(b"0"), false).mask, 0);
        let spec = top.child(s, 0, Some(b"spec"), false);
        assert!(spec.child(s, 1, Some(b"request"), false).bytes);
    }

    #[test]
    fn other_schemas_track_nothing() {
        for s in [Schema::Unstructured, Schema::Unknown, Schema::Typed(&[])] {
            let top = Position::top(s);
            assert_eq!(top.mask, 0);
            assert!(!top.child(s, 0, Some(b"binaryData"), false).bytes);
        }
    }
}
