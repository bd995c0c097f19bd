//! Configuration errors in an operator's words: never serde's "unknown variant" or a
//! Rust type's name (`usize`), always what the key takes.

/// A value that is none of a key's accepted values, in an operator's words:
/// `"on" is not one of: auto, off`.
pub fn not_one_of(value: &str, accepted: &[&str]) -> String {
    format!("{value:?} is not one of: {}", accepted.join(", "))
}

/// serde's `unknown variant `x`, expected one of `a`, `b`` (or `` `a` or `b` ``) as
/// [`not_one_of`]; `None` for any other message.
fn unknown_variant(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown variant `")?;
    let (value, expected) = rest.split_once("`, expected ")?;
    let expected = expected.strip_prefix("one of ").unwrap_or(expected);
    let accepted: Vec<&str> = expected
        .split([',', ' '])
        .filter(|w| !w.is_empty() && *w != "or")
        .map(|w| w.trim_matches('`'))
        .collect();
    Some(not_one_of(value, &accepted))
}

/// A serde message in an operator's words: a value outside a key's list as
/// [`not_one_of`], a refused value with what the key takes, and serde's Rust type names
/// (`expected usize`) in words.
pub(super) fn plain_toml_error(message: &str) -> String {
    if let Some(words) = unknown_variant(message) {
        return words;
    }
    // `invalid value: integer `-1`, expected usize`: the value, then what the key takes.
    let mut out = match message
        .strip_prefix("invalid value: ")
        .and_then(|m| m.split_once(" `"))
        .and_then(|(_, m)| m.split_once("`, "))
    {
        Some((value, expected)) => format!("{value} is not accepted: {expected}"),
        None => message.to_string(),
    };
    for (rust, words) in [
        ("expected usize", "expected a whole number, 0 or more"),
        ("expected u64", "expected a whole number, 0 or more"),
        ("expected u32", "expected a whole number, 0 or more"),
        ("expected u16", "expected a whole number, 0 or more"),
        ("expected u8", "expected a whole number, 0 or more"),
        ("expected a boolean", "expected true or false"),
        ("expected a sequence", "expected a list, [\"a\", \"b\"]"),
    ] {
        out = out.replace(rust, words);
    }
    out
}
