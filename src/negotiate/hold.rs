//! The hold's decisions (docs/wire.md §2b): an answer to a client with client-go
//! 1.32–1.35's CBOR limits ([`super::protect`]) is made CBOR only once its body is known
//! to have no array or map wider than they allow. `proxy::hold` reads and writes; every
//! choice it makes is one of these, each table-tested:
//!
//! - [`Holding::next`]: after each read of the body's start, read on or let what is held
//!   go, as decided at the head (CBOR) or as the upstream's JSON, and why;
//! - [`Holding::send_again`]: whether a request whose upstream connection failed before
//!   the response head is sent again, as [`super::pool::retry`] decides for any attempt.
//!
//! Pure and total: no I/O, no panics; the width itself is the codec's
//! ([`crate::codec::BreadthScanner`]).

use super::pool::{retry, Attempt, Retry};
use super::protect::Reason;
use crate::codec::Breadth;

/// The most times a held request is sent: the first attempt and, when a pooled
/// connection the upstream closed while idle fails before the head, a retry on another,
/// at most this many in all (pingora bounds its own retries alike, `max_retries`).
pub const MAX_SENDS: u8 = 3;

/// What happened since the last decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The head was decided Hold: nothing is read yet.
    Start,
    /// A piece of `len` bytes was read: its width so far, and whether the upstream says
    /// the body is complete with it.
    Piece {
        len: usize,
        breadth: Breadth,
        done: bool,
    },
    /// The body ended (no more pieces).
    End,
}

/// What the hold does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Read another piece.
    Read,
    /// Let the held pieces go: as CBOR, decided at the head (`json: None`), or as the
    /// upstream's JSON for `json`'s reason; `whole`: they are the whole body.
    Release { json: Option<Reason>, whole: bool },
}

/// One held response's start: how much is held, against the bound
/// (`cbor_protection.hold_bytes`), and how often the request was sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holding {
    bound: usize,
    bytes: usize,
    sends: u8,
}

impl Holding {
    /// A held request, sent once, with nothing held yet.
    pub fn new(bound: usize) -> Self {
        Holding {
            bound,
            bytes: 0,
            sends: 1,
        }
    }

    /// After `event`: read on, or let what is held go. Held bytes never pass the bound by
    /// more than one read: at the bound the answer is undecided, so JSON.
    pub fn next(&mut self, event: Event) -> Next {
        let undecided = Next::Release {
            json: Some(Reason::Undecided),
            whole: false,
        };
        match event {
            Event::End => Next::Release {
                json: None,
                whole: true,
            },
            Event::Start if self.bytes >= self.bound => undecided,
            Event::Start => Next::Read,
            Event::Piece { len, breadth, done } => {
                self.bytes = self.bytes.saturating_add(len);
                match breadth {
                    Breadth::Within if done => Next::Release {
                        json: None,
                        whole: true,
                    },
                    Breadth::Within if self.bytes >= self.bound => undecided,
                    Breadth::Within => Next::Read,
                    Breadth::Over => Next::Release {
                        json: Some(Reason::OverLimit),
                        whole: done,
                    },
                    // Nesting deeper than the codec walks: nothing more can be known.
                    Breadth::TooDeep => Next::Release {
                        json: Some(Reason::Undecided),
                        whole: done,
                    },
                }
            }
        }
    }

    /// The attempt failed before the response head; `reused`: its connection came from
    /// the pool. Sent again as [`retry`] decides for a `GET` with no body that nobody
    /// answered (a pooled connection the upstream closed while idle:
    /// [`Retry::Connection`]), at most [`MAX_SENDS`] times in all; `None`: the failure is
    /// the answer.
    pub fn send_again(&mut self, reused: bool) -> Option<Retry> {
        let again = retry(&Attempt {
            idempotent: true,
            body_kept: true,
            answered: false,
            refused: false,
            ended_before_body: false,
            transport: reused,
            resent: 0,
            replay: false,
            answered_locally: false,
        })
        .filter(|_| self.sends < MAX_SENDS)?;
        self.sends += 1;
        Some(again)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOLD: usize = 100;

    fn piece(len: usize, breadth: Breadth, done: bool) -> Event {
        Event::Piece { len, breadth, done }
    }

    fn release(json: Option<Reason>, whole: bool) -> Next {
        Next::Release { json, whole }
    }

    #[test]
    fn what_the_hold_does_after_each_read() {
        use Breadth::*;
        let (over, undecided) = (Some(Reason::OverLimit), Some(Reason::Undecided));
        // (bound, events in order, what follows the last one)
        let table: &[(usize, &[Event], Next)] = &[
            (HOLD, &[Event::Start], Next::Read),
            // A bound of nothing decides nothing: JSON at once.
            (0, &[Event::Start], release(undecided, false)),
            // The whole body within the limit: CBOR.
            (
                HOLD,
                &[Event::Start, piece(10, Within, true)],
                release(None, true),
            ),
            (HOLD, &[Event::Start, piece(10, Within, false)], Next::Read),
            (
                HOLD,
                &[Event::Start, piece(10, Within, false), Event::End],
                release(None, true),
            ),
            // A body with no bytes.
            (HOLD, &[Event::Start, Event::End], release(None, true)),
            // Too wide: JSON, whether or not the body has ended.
            (
                HOLD,
                &[Event::Start, piece(10, Over, false)],
                release(over, false),
            ),
            (
                HOLD,
                &[Event::Start, piece(10, Over, true)],
                release(over, true),
            ),
            // Too deep to know.
            (
                HOLD,
                &[Event::Start, piece(10, TooDeep, false)],
                release(undecided, false),
            ),
            (
                HOLD,
                &[Event::Start, piece(10, TooDeep, true)],
                release(undecided, true),
            ),
            // The bound reached undecided: JSON, the rest still to come.
            (
                HOLD,
                &[
                    Event::Start,
                    piece(60, Within, false),
                    piece(40, Within, false),
                ],
                release(undecided, false),
            ),
            (
                HOLD,
                &[
                    Event::Start,
                    piece(60, Within, false),
                    piece(39, Within, false),
                ],
                Next::Read,
            ),
            // Reaching the bound with the body's end decides it.
            (
                HOLD,
                &[
                    Event::Start,
                    piece(60, Within, false),
                    piece(40, Within, true),
                ],
                release(None, true),
            ),
            // Past the bound in one read, and wide in it: the width is the reason.
            (
                HOLD,
                &[Event::Start, piece(500, Over, false)],
                release(over, false),
            ),
            // Lengths that would overflow saturate (past the bound: undecided).
            (
                usize::MAX,
                &[
                    piece(usize::MAX - 1, Within, false),
                    piece(2, Within, false),
                ],
                release(undecided, false),
            ),
        ];
        for (bound, events, want) in table {
            let mut h = Holding::new(*bound);
            let got = events.iter().map(|e| h.next(*e)).last();
            assert_eq!(got, Some(*want), "{bound} {events:?}");
        }
    }

    #[test]
    fn which_failed_sends_are_sent_again() {
        // (whether each failed attempt's connection was pooled, the decisions)
        let table: &[(&[bool], &[Option<Retry>])] = &[
            // A new connection's failure is the answer.
            (&[false], &[None]),
            // Pooled connections closed while idle: sent again, at most MAX_SENDS in all.
            (&[true, false], &[Some(Retry::Connection), None]),
            (
                &[true, true, true],
                &[Some(Retry::Connection), Some(Retry::Connection), None],
            ),
        ];
        for (reused, want) in table {
            let mut h = Holding::new(HOLD);
            let got: Vec<_> = reused.iter().map(|r| h.send_again(*r)).collect();
            assert_eq!(&got[..], *want, "{reused:?}");
        }
        assert_eq!(
            MAX_SENDS, 3,
            "as many sends as before: one, then two pooled retries"
        );
    }
}
