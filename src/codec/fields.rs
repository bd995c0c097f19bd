//! Field schemas (docs/wire.md §2 and §3, byte fields): which paths of an object hold Go
//! `[]byte` (`format: byte` in the OpenAPI schema), and the bookkeeping that finds those
//! paths while a body streams, in CBOR request bodies and in JSON answers.
//!
//! A CBOR-enabled kube-apiserver (1.36.2, observed) decodes a byte string in a `[]byte`
//! field as its bytes when it carries an expected-encoding tag (21, 22, 23), as base64 text
//! when it carries none, and refuses a text string there (`binaryData: {"b":
//! 23(h'0001fffe')}` and `{"b": h'4141482f2f673d3d'}` are both stored as `00 01 ff fe`).
//! In a `string` field it keeps the tag's text form (fxamacker/cbor's
//! `ByteStringToStringAllowedWithExpectedLaterEncoding`, docs/wire.md §3's table). It writes
//! a `[]byte` field as tag 22 and the bytes. The JSON a legacy server reads, and the CBOR a
//! client gets, must therefore depend on the field's Go type, which only a schema can tell.
//! A schema is a short list of paths; matching is a bit mask per open container, so it
//! costs no allocation beyond one small position per nesting level.

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

impl Schema {
    /// No value can be a `[]byte` field, nor a byte string refused for its field: a typed
    /// kind without `[]byte` fields (a Pod, a Lease) reads exactly as an unstructured body,
    /// so the transcoder may take its fast paths.
    pub fn marks_nothing(self) -> bool {
        match self {
            Schema::Unstructured => true,
            Schema::Typed(paths) => paths.is_empty(),
            Schema::Unknown => false,
        }
    }
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
    /// How far below the object's top this value is (the top is 0): the step of each path
    /// its children are matched against.
    level: u8,
    /// Where objects of the schema's kind begin below this value, in a response.
    root: Root,
}

/// Where an object of the schema's kind starts again, in a response (docs/wire.md §2):
/// the elements of a list's `items`, a watch event's `object`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Root {
    None,
    /// The top of a response: the value under `items` is a list's array of objects.
    Items,
    /// A list's `items`: each element is an object.
    Elements,
    /// A watch event: the value under `object` is an object.
    Event,
}

impl Position {
    /// The top-level item of a request body: every path is still possible.
    pub fn top(schema: Schema) -> Position {
        let mask = match schema {
            Schema::Typed(paths) => {
                debug_assert!(paths.len() <= MAX_PATHS);
                ((1u16 << paths.len().min(MAX_PATHS)) - 1) as u8
            }
            _ => 0,
        };
        Position {
            mask,
            bytes: false,
            level: 0,
            root: Root::None,
        }
    }

    /// The top-level item of a response: an object of the kind, or a list of them
    /// (`items[]`). No kind with `[]byte` fields has a top-level field `items`.
    pub fn response_top(schema: Schema) -> Position {
        Position {
            root: Root::Items,
            ..Position::top(schema)
        }
    }

    /// A watch event: its `object` is an object of the kind.
    pub fn event() -> Position {
        Position {
            root: Root::Event,
            ..Position::top(Schema::Unstructured)
        }
    }

    /// The position of a child of the container at `self`, reached through `key`
    /// (`None`: an array element, or a key that names no field, such as one that was
    /// tagged).
    pub fn child(self, schema: Schema, key: Option<&[u8]>, array: bool) -> Position {
        const NOTHING: Position = Position {
            mask: 0,
            bytes: false,
            level: 0,
            root: Root::None,
        };
        match self.root {
            Root::None if self.mask == 0 => return NOTHING,
            Root::Elements if array => return Position::top(schema),
            Root::Event if !array && key == Some(b"object") => return Position::top(schema),
            _ => {}
        }
        let Schema::Typed(paths) = schema else {
            return NOTHING;
        };
        let depth = self.level as usize;
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
        let root = if self.root == Root::Items && !array && key == Some(b"items") {
            Root::Elements
        } else {
            Root::None
        };
        Position {
            mask,
            bytes,
            level: self.level.saturating_add(1),
            root,
        }
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
        let bd = top.child(s, Some(b"binaryData"), false);
        assert_eq!((bd.mask, bd.bytes), (1, false));
        assert!(bd.child(s, Some(b"anything"), false).bytes);
        // Under an array, or one level deeper, it no longer applies.
        assert!(!bd.child(s, None, true).bytes);
        let v = bd.child(s, Some(b"k"), false);
        let x = v.child(s, Some(b"x"), false);
        assert_eq!((x.mask, x.bytes), (0, false));
        // Other keys, a prefix, another case, a tagged key: nothing.
        for k in [&b"data"[..], b"binaryDat", b"BinaryData"] {
            assert_eq!(top.child(s, Some(k), false).mask, 0, "{k:?}");
        }
        assert_eq!(top.child(s, None, false).mask, 0);
    }

    #[test]
    fn several_paths_share_prefixes_and_arrays() {
        let s = Schema::Typed(HOOKS);
        let top = Position::top(s);
        assert_eq!(top.mask, 0b11);
        let w = top.child(s, Some(b"webhooks"), false);
        assert_eq!(w.mask, 0b01);
        let e = w.child(s, None, true);
        let cc = e.child(s, Some(b"clientConfig"), false);
        assert!(cc.child(s, Some(b"caBundle"), false).bytes);
        assert!(!cc.child(s, Some(b"url"), false).bytes);
        // The map under `webhooks` is not an array: no match.
        assert_eq!(w.child(s, Some(b"0"), false).mask, 0);
        let spec = top.child(s, Some(b"spec"), false);
        assert!(spec.child(s, Some(b"request"), false).bytes);
    }

    #[test]
    fn other_schemas_track_nothing() {
        for s in [Schema::Unstructured, Schema::Unknown, Schema::Typed(&[])] {
            let top = Position::top(s);
            assert_eq!(top.mask, 0);
            assert!(!top.child(s, Some(b"binaryData"), false).bytes);
        }
    }

    #[test]
    fn responses_find_objects_in_lists_and_watch_events() {
        let s = Schema::Typed(CM);
        let field = |p: Position| {
            p.child(s, Some(b"binaryData"), false)
                .child(s, Some(b"k"), false)
                .bytes
        };
        // A single object, a list's items, a watch event's object.
        let top = Position::response_top(s);
        assert!(field(top));
        let items = top.child(s, Some(b"items"), false);
        assert!(field(items.child(s, None, true)));
        assert!(field(Position::event().child(s, Some(b"object"), false)));
        // Not elsewhere: `items` below the top, an object that is not a list's element,
        // another key of an event, a request body's `items`.
        let meta = top.child(s, Some(b"metadata"), false);
        let deep = meta.child(s, Some(b"items"), false).child(s, None, true);
        assert!(!field(deep));
        assert!(!field(items.child(s, Some(b"x"), false)));
        assert!(!field(Position::event().child(s, Some(b"type"), false)));
        let request = Position::top(s).child(s, Some(b"items"), false);
        assert!(!field(request.child(s, None, true)));
    }
}
