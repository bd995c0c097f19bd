//! Counting the top-level data items of a CBOR Sequence (RFC 8742) without
//! decoding them: [`ItemCounter`] is how the proxy counts the events of a CBOR
//! watch stream it passes through untouched.
//!
//! It owns only the walk over heads (RFC 8949 §3): major types 0–7, argument
//! lengths, string payloads skipped by length, indefinite-length strings, arrays
//! and maps closed by a break, tags. It does not validate UTF-8, map keys,
//! simple values or tag contents, and it produces nothing but a count.
//!
//! Like the rest of the codec it is sans-IO and total: bytes go in, in pieces of
//! any size down to one byte, and the count is the same for every split. There
//! is no recursion (an explicit stack of open containers), the stack never grows
//! past [`Limits::max_depth`](super::Limits::max_depth) frames (tags count as a
//! level, as Kubernetes counts them), and no length read from the input reaches
//! the allocator. Malformed input, or nesting beyond the limit, stops the count
//! for good ([`ItemCounter::error`]); nothing panics.

use super::{CodecError, Reason};

/// An open container (or tag) on the stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Frame {
    /// This many items still to come (a definite array or map — a map's count is
    /// twice its pairs — or a tag's one content item).
    Definite(u128),
    /// An indefinite-length string, array or map: open until a break.
    Indefinite,
}

/// Where the walk is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// At the initial byte of an item (or of a break).
    Head,
    /// Reading `left` more argument bytes of a head (major type `major`).
    Argument { major: u8, left: u8, value: u64 },
    /// Skipping `left` more bytes of a string's payload.
    Payload { left: u64 },
    /// Stopped at an error.
    Failed(CodecError),
}

/// Counts the completed top-level items of a CBOR Sequence, fed in pieces.
#[derive(Debug)]
pub struct ItemCounter {
    state: State,
    stack: Vec<Frame>,
    max_depth: usize,
    items: u64,
    offset: u64,
}

/// Frames reserved up front; the stack grows past this only as nesting does.
const INITIAL_STACK: usize = 16;

impl ItemCounter {
    /// A counter that stops at nesting deeper than `max_depth` (the top-level
    /// container is level 1).
    pub fn new(max_depth: usize) -> Self {
        ItemCounter {
            state: State::Head,
            stack: Vec::with_capacity(INITIAL_STACK.min(max_depth)),
            max_depth,
            items: 0,
            offset: 0,
        }
    }

    /// Completed top-level items so far.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// Why counting stopped, with the offset of the offending byte, if it has.
    pub fn error(&self) -> Option<CodecError> {
        match self.state {
            State::Failed(e) => Some(e),
            _ => None,
        }
    }

    /// Whether the input so far ends between items (nothing is half read).
    pub fn at_boundary(&self) -> bool {
        self.state == State::Head && self.stack.is_empty()
    }

    /// Walk the next piece of input; returns how many top-level items it completed.
    pub fn feed(&mut self, input: &[u8]) -> u64 {
        let before = self.items;
        let mut i = 0;
        while i < input.len() {
            match self.state {
                State::Failed(_) => break,
                State::Payload { left } => {
                    let take = (input.len() - i).min(usize::try_from(left).unwrap_or(usize::MAX));
                    i += take;
                    self.offset += take as u64;
                    let left = left - take as u64;
                    if left == 0 {
                        self.state = State::Head;
                        self.item_done();
                    } else {
                        self.state = State::Payload { left };
                    }
                }
                State::Argument { major, left, value } => {
                    let value = (value << 8) | u64::from(input[i]);
                    i += 1;
                    self.offset += 1;
                    if left == 1 {
                        self.state = State::Head;
                        self.head(major, value);
                    } else {
                        self.state = State::Argument {
                            major,
                            left: left - 1,
                            value,
                        };
                    }
                }
                State::Head => {
                    let b = input[i];
                    i += 1;
                    self.offset += 1;
                    let (major, ai) = (b >> 5, b & 0x1f);
                    match ai {
                        0..=23 => self.head(major, u64::from(ai)),
                        24..=27 => {
                            self.state = State::Argument {
                                major,
                                left: 1 << (ai - 24),
                                value: 0,
                            }
                        }
                        28..=30 => self.fail(Reason::Syntax),
                        _ => self.indefinite(major),
                    }
                }
            }
        }
        self.items - before
    }

    /// A head with its argument read: `offset` is just past it.
    fn head(&mut self, major: u8, value: u64) {
        match major {
            // Integers, and simple values and floats (their bits are the argument).
            0 | 1 | 7 => self.item_done(),
            2 | 3 if value == 0 => self.item_done(),
            2 | 3 => self.state = State::Payload { left: value },
            4 | 5 if value == 0 => self.item_done(),
            4 => self.push(Frame::Definite(u128::from(value))),
            5 => self.push(Frame::Definite(u128::from(value) * 2)),
            _ => self.push(Frame::Definite(1)), // 6: a tag and its one item
        }
    }

    /// An initial byte with additional information 31.
    fn indefinite(&mut self, major: u8) {
        match major {
            2..=5 => self.push(Frame::Indefinite),
            7 => match self.stack.last() {
                Some(Frame::Indefinite) => {
                    self.stack.pop();
                    self.item_done();
                }
                _ => self.fail(Reason::Syntax),
            },
            _ => self.fail(Reason::Syntax),
        }
    }

    fn push(&mut self, f: Frame) {
        if self.stack.len() >= self.max_depth {
            self.fail(Reason::DepthExceeded);
        } else {
            self.stack.push(f);
        }
    }

    /// One item is complete: close every definite container it completes, and
    /// count it if it was top-level.
    fn item_done(&mut self) {
        loop {
            match self.stack.last_mut() {
                None => {
                    self.items += 1;
                    return;
                }
                Some(Frame::Indefinite) => return,
                Some(Frame::Definite(left)) => {
                    *left -= 1;
                    if *left > 0 {
                        return;
                    }
                    self.stack.pop();
                }
            }
        }
    }

    fn fail(&mut self, reason: Reason) {
        self.state = State::Failed(CodecError::new(reason, self.offset.saturating_sub(1)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{cbor_to_json, CborToJsonOptions};

    fn count(input: &[u8]) -> (u64, Option<Reason>) {
        let mut c = ItemCounter::new(10_000);
        let n = c.feed(input);
        assert_eq!(n, c.items());
        (n, c.error().map(|e| e.reason))
    }

    fn recording(name: &str) -> Vec<u8> {
        let p = format!(
            "{}/tests/data/corpus/native-1.36/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read(p).unwrap()
    }

    /// The number of lines `CborToJson` writes for a sequence: its event count.
    fn decoded_events(input: &[u8]) -> u64 {
        let json = cbor_to_json(
            input,
            CborToJsonOptions {
                sequence: true,
                ..Default::default()
            },
        )
        .unwrap();
        json.iter().filter(|&&b| b == b'\n').count() as u64
    }

    #[test]
    fn counts_known_sequences() {
        #[rustfmt::skip]
        let cases: &[(&[u8], u64)] = &[
            (&[], 0),
            (&[0x00], 1),
            (&[0x00, 0x20, 0xf6], 3),
            (&[0x18, 0x64], 1),                                   // 100
            (&[0x1b, 0, 0, 0, 0, 0, 0, 0, 1, 0x01], 2),           // u64, then 1
            (&[0x43, 1, 2, 3, 0x63, b'a', b'b', b'c'], 2),        // strings skipped
            (&[0x83, 0x01, 0x82, 0x02, 0x03, 0x04], 1),           // [1, [2, 3], 4]
            (&[0xa1, 0x61, b'k', 0xa0, 0x80], 2),                 // {"k": {}}, []
            (&[0x9f, 0x01, 0x9f, 0xff, 0xff, 0x01], 2),           // [_ 1, [_ ]], 1
            (&[0xbf, 0x61, b'a', 0x01, 0xff], 1),                 // {_ "a": 1}
            (&[0x5f, 0x41, 0x00, 0x40, 0xff, 0x7f, 0xff], 2),     // (_ h'00', h''), (_ )
            (&[0xd9, 0xd9, 0xf7, 0xc1, 0x1a, 0, 0, 0, 1], 1),     // 55799(1(1))
            (&[0xfb, 0x3f, 0xf0, 0, 0, 0, 0, 0, 0, 0xf9, 0, 0], 2), // 1.0, 0.0
            (&[0xf8, 0x20], 1),                                   // simple(32)
        ];
        for (input, want) in cases {
            assert_eq!(count(input), (*want, None), "{input:02x?}");
        }
        // Incomplete items are not counted.
        assert_eq!(count(&[0x01, 0x82, 0x01]), (1, None));
        assert_eq!(count(&[0x5a, 0xff, 0xff, 0xff, 0xff]), (0, None));
    }

    #[test]
    fn malformed_input_stops_the_count() {
        #[rustfmt::skip]
        let cases: &[(&[u8], u64, Reason)] = &[
            (&[0x01, 0xff, 0x01], 1, Reason::Syntax),        // break at top level
            (&[0x81, 0xff], 0, Reason::Syntax),              // break in a definite array
            (&[0x01, 0x1c, 0x01], 1, Reason::Syntax),        // reserved additional info
            (&[0x1f], 0, Reason::Syntax),                    // indefinite integer
            (&[0xdf], 0, Reason::Syntax),                    // indefinite tag
        ];
        for (input, want, reason) in cases {
            assert_eq!(count(input), (*want, Some(*reason)), "{input:02x?}");
        }
        let mut c = ItemCounter::new(4);
        c.feed(&[0x01, 0x01, 0xff]);
        assert_eq!(c.error().unwrap().offset, 2);
        assert_eq!(c.feed(&[0x01]), 0, "nothing counts after an error");
    }

    #[test]
    fn counts_the_recorded_watch_streams() {
        for (name, events) in [("watch-cm.body", 2), ("watch-cr.body", 1)] {
            let body = recording(name);
            assert_eq!(decoded_events(&body), events, "{name} decoded");
            assert_eq!(count(&body), (events, None), "{name}");
        }
    }

    #[test]
    fn every_split_gives_the_same_count() {
        for name in ["watch-cm.body", "watch-cr.body"] {
            let body = recording(name);
            let want = count(&body).0;
            for at in 0..=body.len() {
                let mut c = ItemCounter::new(10_000);
                let n = c.feed(&body[..at]) + c.feed(&body[at..]);
                assert_eq!((n, c.error()), (want, None), "{name} split at {at}");
                assert!(c.at_boundary());
            }
            let mut c = ItemCounter::new(10_000);
            let n: u64 = body.iter().map(|b| c.feed(std::slice::from_ref(b))).sum();
            assert_eq!(n, want, "{name} byte by byte");
        }
    }

    #[test]
    fn nesting_beyond_the_limit_stops_without_growing() {
        for open in [0x81u8, 0x9f, 0xa1, 0xbf, 0xc6] {
            let mut c = ItemCounter::new(100);
            let hostile = vec![open; 1 << 20];
            assert_eq!(c.feed(&[0x01]), 1);
            assert_eq!(c.feed(&hostile), 0);
            let e = c.error().expect("stopped");
            assert_eq!((e.reason, e.offset), (Reason::DepthExceeded, 101));
            assert!(c.stack.capacity() <= 128, "{}", c.stack.capacity());
        }
        // Exactly at the limit is fine.
        let mut c = ItemCounter::new(3);
        assert_eq!(c.feed(&[0x81, 0xc1, 0x81, 0x01]), 1);
        assert_eq!(c.error(), None);
        assert_eq!(c.feed(&[0x81, 0x81, 0x81, 0x81]), 0);
        assert_eq!(c.error().unwrap().reason, Reason::DepthExceeded);
    }

    #[test]
    fn huge_declared_lengths_allocate_nothing() {
        let mut c = ItemCounter::new(10);
        // A map of 2^64-1 pairs and a string of 2^64-1 bytes: counters only.
        c.feed(&[0xbb, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        c.feed(&[0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
        c.feed(&[0u8; 4096]);
        assert_eq!((c.items(), c.error()), (0, None));
        assert!(c.stack.capacity() <= 10);
    }
}
