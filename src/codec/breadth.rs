//! How wide a JSON body's containers are: [`BreadthScanner`] says, as early as the
//! bytes allow, whether any array has more than N elements or any object more than N
//! pairs. The proxy uses it to keep answers that a client decoding CBOR with
//! client-go 1.32–1.35's limits (1,024 elements per array, 1,024 pairs per map) would
//! refuse from being made CBOR (docs/wire.md §2b).
//!
//! It owns only the walk over JSON's structure (RFC 8259): strings (with escapes, so an
//! escaped quote does not end one), `[`/`{` opening, `]`/`}` closing, `,` between
//! elements, and everything else (numbers, `true`, `false`, `null`, whitespace, `:`)
//! as bytes that start or continue a value. It does not validate; the transcoder does.
//! An element is counted when its first byte arrives, so the verdict comes at the first
//! byte of the (N+1)th element.
//!
//! Like the rest of the codec it is sans-IO and total: bytes go in, in pieces of any
//! size down to one byte, and the verdict (and the offset it came at) is the same for
//! every split. There is no recursion and no allocation per byte: one counter per open
//! container on a stack that never grows past [`Limits::max_depth`](super::Limits)
//! frames. Nesting beyond that stops the walk for good ([`Breadth::TooDeep`]); nothing
//! panics, whatever the input.

/// What the bytes so far show.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Breadth {
    /// No container over the limit yet.
    Within,
    /// A container has more than the limit's elements (or pairs).
    Over,
    /// Nesting deeper than the maximum depth: the walk stopped, nothing more is known.
    TooDeep,
}

/// Frames reserved up front; the stack grows past this only as nesting does.
const INITIAL_STACK: usize = 16;

/// Scans a JSON text (or a sequence of them, as a watch stream is) fed in pieces.
#[derive(Debug)]
pub struct BreadthScanner {
    /// Elements (or pairs) seen in each open container, innermost last.
    stack: Vec<u64>,
    max_depth: usize,
    limit: u64,
    /// Inside a string.
    in_string: bool,
    /// Inside a string, right after a backslash: the next byte is escaped.
    escape: bool,
    /// The innermost container is waiting for an element to start (after its opening
    /// bracket or a comma).
    pending: bool,
    verdict: Breadth,
    /// Bytes consumed; where the verdict came, once it has.
    offset: u64,
}

impl BreadthScanner {
    /// A scanner for "more than `limit` elements", that stops at nesting deeper than
    /// `max_depth` (the top-level container is level 1).
    pub fn new(limit: u64, max_depth: usize) -> Self {
        BreadthScanner {
            stack: Vec::with_capacity(INITIAL_STACK.min(max_depth)),
            max_depth,
            limit,
            in_string: false,
            escape: false,
            pending: false,
            verdict: Breadth::Within,
            offset: 0,
        }
    }

    /// What the bytes so far show.
    pub fn verdict(&self) -> Breadth {
        self.verdict
    }

    /// Bytes consumed: once the verdict is not [`Breadth::Within`], the offset just
    /// past the byte that decided it.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Feed the next piece. Once the verdict is not [`Breadth::Within`] it stays, and
    /// further bytes are not looked at.
    pub fn feed(&mut self, bytes: &[u8]) -> Breadth {
        if self.verdict != Breadth::Within {
            return self.verdict;
        }
        let mut i = 0;
        while i < bytes.len() {
            if self.in_string {
                i += self.skip_string(&bytes[i..]);
                continue;
            }
            let b = bytes[i];
            i += 1;
            match b {
                b' ' | b'\t' | b'\n' | b'\r' | b':' => {}
                b',' => self.pending = !self.stack.is_empty(),
                b']' | b'}' => {
                    self.stack.pop();
                    self.pending = false;
                }
                _ => {
                    if self.start_value() {
                        self.offset += i as u64;
                        return self.verdict;
                    }
                    match b {
                        b'"' => self.in_string = true,
                        b'[' | b'{' => {
                            if self.stack.len() >= self.max_depth {
                                self.verdict = Breadth::TooDeep;
                                self.offset += i as u64;
                                return self.verdict;
                            }
                            self.stack.push(0);
                            self.pending = true;
                        }
                        _ => {}
                    }
                }
            }
        }
        self.offset += bytes.len() as u64;
        self.verdict
    }

    /// A byte that starts or continues a value (or an object's key): count it as an
    /// element of the innermost container if that container is waiting for one.
    /// `true`: that element is one too many.
    fn start_value(&mut self) -> bool {
        if !std::mem::take(&mut self.pending) {
            return false;
        }
        let Some(count) = self.stack.last_mut() else {
            return false;
        };
        *count += 1;
        if *count > self.limit {
            self.verdict = Breadth::Over;
            return true;
        }
        false
    }

    /// Inside a string: consume up to and including its closing quote; the number of
    /// bytes taken.
    fn skip_string(&mut self, bytes: &[u8]) -> usize {
        for (n, &b) in bytes.iter().enumerate() {
            if std::mem::take(&mut self.escape) {
                continue;
            }
            match b {
                b'\\' => self.escape = true,
                b'"' => {
                    self.in_string = false;
                    return n + 1;
                }
                _ => {}
            }
        }
        bytes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan(limit: u64, text: &str) -> (Breadth, u64) {
        let mut s = BreadthScanner::new(limit, 8);
        let v = s.feed(text.as_bytes());
        (v, s.offset())
    }

    #[test]
    fn containers_are_counted_by_elements_and_pairs() {
        use Breadth::*;
        let table: &[(u64, &str, Breadth)] = &[
            (2, "[1,2]", Within),
            (2, "[1,2,3]", Over),
            (2, "[]", Within),
            (0, "[]", Within),
            (0, "[ ]", Within),
            (0, "{}", Within),
            (0, "[1]", Over),
            (2, r#"{"a":1,"b":2}"#, Within),
            (2, r#"{"a":1,"b":2,"c":3}"#, Over),
            // A pair's value is not a second element, whatever it is.
            (1, r#"{"a":[1],"b":2}"#, Over),
            (1, r#"{"a":{"x":[1]}}"#, Within),
            (2, r#"[[1,2],[3,4]]"#, Within),
            (2, r#"[[1,2,3]]"#, Over),
            // Strings: commas, brackets and escaped quotes inside do not count.
            (2, r#"["a,b,c","[[[","\"],[\""]"#, Over),
            (3, r#"["a,b,c","[[[","\"],[\""]"#, Within),
            (1, r#"["\\",]"#, Within),
            (2, r#"{"k\"ey,":"v,a\\","x":"y"}"#, Within),
            (1, r#"{"k\"ey,":"v,a\\","x":"y"}"#, Over),
            // Numbers and literals, whitespace anywhere.
            (3, " [ -1.5e+3 , true,\n\tnull ] ", Within),
            (2, " [ -1.5e+3 , true,\n\tnull ] ", Over),
            // A sequence of documents (a watch stream): each counted on its own.
            (2, "{\"a\":[1,2]}\n{\"a\":[1,2]}\n", Within),
            (2, "{\"a\":[1,2]}\n{\"a\":[1,2,3]}\n", Over),
            // A bare scalar has no container.
            (0, "\"a,b\"", Within),
            (0, "12345", Within),
        ];
        for (limit, text, want) in table {
            assert_eq!(scan(*limit, text).0, *want, "{limit} {text}");
        }
    }

    #[test]
    fn the_verdict_comes_at_the_first_byte_of_the_element_too_many() {
        assert_eq!(scan(2, "[1,2,3,4,5]"), (Breadth::Over, 6));
        assert_eq!(scan(1, r#"{"a":1, "b":2}"#), (Breadth::Over, 9));
    }

    #[test]
    fn nesting_past_the_depth_stops_the_walk() {
        let mut s = BreadthScanner::new(1, 3);
        assert_eq!(s.feed(b"[[["), Breadth::Within);
        assert_eq!(s.feed(b"[1,2,3]]]]"), Breadth::TooDeep);
        assert_eq!(s.offset(), 4);
        assert_eq!(s.feed(b"[1,2,3]"), Breadth::TooDeep);
        assert!(s.stack.len() <= 3);
    }

    #[test]
    fn malformed_input_never_panics_and_keeps_the_stack_bounded() {
        let mut s = BreadthScanner::new(3, 4);
        for text in ["]]]}}}", "[{[{", ",,,,", "\"\\", "[1,,,,2]", "{:::}"] {
            s.feed(text.as_bytes());
            assert!(s.stack.len() <= 4);
        }
    }
}
