//! How many header lines an HTTP/1.1 request head has, as its bytes arrive, and its
//! `Accept`: pingora-core 0.9.1's HTTP/1 parser has a fixed 256 header slots
//! (`MAX_HEADERS` in `protocols/http/v1/server.rs`, not configurable) and answers a
//! head with more lines with a bare 400, where kube-apiserver (Go) limits only the
//! head's bytes (1 MiB) and takes them. A user impersonating someone with hundreds of
//! groups sends one `Impersonate-Group` line per group. The inbound stream counts the
//! lines as they are read, and answers such a head with a 431 `Status` instead
//! (docs/wire.md §4), in the format the `Accept` asks for.

use super::plan::{head_refusal_for, LocalReply};

/// pingora's header slots over HTTP/1.1 (pingora-core 0.9.1 `MAX_HEADERS`).
pub const HTTP1_MAX_HEADER_LINES: usize = 256;

/// The most of the `Accept` lines kept to choose the refusal's format.
const MAX_ACCEPT: usize = 1024;

const ACCEPT: &[u8] = b"accept:";

/// The line count and `Accept` of one request head, fed its bytes in order.
#[derive(Debug, Default)]
pub struct HeadLines {
    /// The blank line that ends the head has been seen: later bytes are its body.
    ended: bool,
    request_line_done: bool,
    /// The current line has a byte other than CR.
    line_started: bool,
    /// Header lines begun.
    headers: usize,
    /// How much of `accept:` the current line's name matched; `u8::MAX` once it did not.
    name_matched: u8,
    in_accept: bool,
    accept: Vec<u8>,
}

impl HeadLines {
    /// Ready for the next request head on the same connection, keeping the `Accept`
    /// buffer's room: a connection's heads reuse one buffer, so a request costs no
    /// allocation here (tests/proxy_alloc.rs pins the count).
    pub fn reset(&mut self) {
        let mut accept = std::mem::take(&mut self.accept);
        accept.clear();
        *self = HeadLines {
            accept,
            ..HeadLines::default()
        };
    }

    /// The next bytes of the head (and maybe of what follows it, which is ignored).
    pub fn feed(&mut self, bytes: &[u8]) {
        let mut at = 0;
        while at < bytes.len() {
            if self.ended {
                return;
            }
            // Inside the request line, or a header line whose name is not `Accept`:
            // nothing matters until the line's end.
            if self.line_started
                && !self.in_accept
                && (!self.request_line_done || self.name_matched == u8::MAX)
            {
                match bytes[at..].iter().position(|&b| b == b'\n') {
                    Some(n) => at += n,
                    None => return,
                }
            }
            // Inside `Accept`'s value: kept up to the line's end (or the cap) in one copy;
            // the end itself is read below.
            if self.in_accept && bytes[at] != b'\n' {
                let rest = &bytes[at..];
                let n = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
                let room = MAX_ACCEPT.saturating_sub(self.accept.len());
                self.accept.extend_from_slice(&rest[..n.min(room)]);
                at += n;
                continue;
            }
            let b = bytes[at];
            at += 1;
            match b {
                b'\n' => {
                    if self.line_started {
                        self.request_line_done = true;
                    } else if self.request_line_done {
                        self.ended = true;
                    }
                    self.line_started = false;
                    self.name_matched = 0;
                    self.in_accept = false;
                }
                b'\r' if !self.line_started => {}
                _ => {
                    if !self.line_started {
                        self.line_started = true;
                        if self.request_line_done {
                            self.headers += 1;
                        }
                    }
                    if self.request_line_done {
                        self.header_byte(b);
                    }
                }
            }
        }
    }

    fn header_byte(&mut self, b: u8) {
        let at = usize::from(self.name_matched);
        if at < ACCEPT.len() {
            if b.to_ascii_lowercase() == ACCEPT[at] {
                self.name_matched += 1;
                if usize::from(self.name_matched) == ACCEPT.len() {
                    self.in_accept = true;
                    if !self.accept.is_empty() && self.accept.len() < MAX_ACCEPT {
                        self.accept.push(b',');
                    }
                }
            } else {
                self.name_matched = u8::MAX;
            }
        }
    }

    /// More header lines than pingora's HTTP/1 parser has slots for.
    pub fn too_many(&self) -> bool {
        self.headers > HTTP1_MAX_HEADER_LINES
    }

    /// The 431 for such a head, in the format its `Accept` asks for.
    pub fn refusal(&self) -> LocalReply {
        let accept = std::str::from_utf8(&self.accept).ok().map(str::trim);
        head_refusal_for(
            accept,
            431,
            "RequestHeaderFieldsTooLarge",
            &format!(
                "the request has more than {HTTP1_MAX_HEADER_LINES} header lines, the most \
                 cborgate takes over HTTP/1.1; over HTTP/2 their number has no limit, only \
                 their size (server.max_header_bytes)"
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::negotiate::Format;

    fn head(headers: usize, accept: Option<&str>) -> Vec<u8> {
        let mut h = b"POST /api/v1/namespaces HTTP/1.1\r\nHost: x\r\n".to_vec();
        if let Some(a) = accept {
            h.extend_from_slice(format!("ACCEPT: {a}\r\n").as_bytes());
        }
        let have = 1 + usize::from(accept.is_some());
        for i in have..headers {
            h.extend_from_slice(format!("Impersonate-Group: g{i}\r\n").as_bytes());
        }
        h.extend_from_slice(b"\r\n{\n\n\n}");
        h
    }

    #[test]
    fn counts_header_lines_in_any_split_up_to_the_blank_line() {
        for (headers, too_many) in [(1, false), (256, false), (257, true), (300, true)] {
            let bytes = head(headers, None);
            for split in [1, 7, 4096] {
                let mut lines = HeadLines::default();
                for chunk in bytes.chunks(split) {
                    lines.feed(chunk);
                }
                assert_eq!(lines.headers, headers, "{headers} in chunks of {split}");
                assert_eq!(lines.too_many(), too_many, "{headers}");
                // The body's newlines after the blank line are not lines of the head.
                lines.feed(b"\n\nx: y\r\n");
                assert_eq!(lines.headers, headers);
            }
        }
    }

    #[test]
    fn any_cut_gives_the_same_count_and_accept() {
        let mut bytes =
            b"GET /api HTTP/1.1\r\nAccept-Encoding: gzip\r\nAccept: a/b\r\nX: accept: no\r\n\
              aCcEpT:c/d\r\n\r\nAccept: body\r\n"
                .to_vec();
        bytes.extend_from_slice(&head(20, Some("e/f"))[..]);
        let mut whole = HeadLines::default();
        whole.feed(&bytes);
        assert_eq!(whole.headers, 4);
        // The CR stays: the refusal's `Accept` parse trims it.
        assert_eq!(whole.accept, b" a/b\r,c/d\r");
        for a in 0..bytes.len() {
            for b in [a, a + 1, a + 9, bytes.len()] {
                let b = b.min(bytes.len());
                let mut lines = HeadLines::default();
                lines.feed(&bytes[..a]);
                lines.feed(&bytes[a..b]);
                lines.feed(&bytes[b..]);
                assert_eq!(
                    (lines.headers, &lines.accept, lines.ended),
                    (whole.headers, &whole.accept, whole.ended),
                    "cut at {a} and {b}"
                );
            }
        }
    }

    #[test]
    fn bare_lf_and_a_line_begun_count() {
        let mut lines = HeadLines::default();
        lines.feed(b"GET / HTTP/1.1\na: b\nc");
        assert_eq!(lines.headers, 2);
        assert!(!lines.ended);
        lines.feed(b": d\n\n");
        assert!(lines.ended);
        assert_eq!(lines.headers, 2);
    }

    #[test]
    fn the_refusal_is_a_431_in_the_format_accept_asks_for() {
        for (accept, format) in [
            (None, Format::Json),
            (Some("application/json"), Format::Json),
            (Some("application/cbor"), Format::Cbor),
            (
                Some("application/cbor;q=1, application/json;q=0.9"),
                Format::Cbor,
            ),
            (Some("application/yaml"), Format::Json),
        ] {
            let mut lines = HeadLines::default();
            lines.feed(&head(300, accept));
            let r = lines.refusal();
            assert_eq!((r.code, r.reason), (431, "RequestHeaderFieldsTooLarge"));
            assert_eq!(r.format, format, "{accept:?}");
            assert!(r.message.contains("256") && r.message.contains("HTTP/2"));
        }
    }

    #[test]
    fn the_kept_accept_is_bounded() {
        let mut lines = HeadLines::default();
        lines.feed(b"GET / HTTP/1.1\r\nAccept: ");
        lines.feed(&[b'a'; 5000]);
        assert_eq!(lines.accept.len(), MAX_ACCEPT);
    }
}
