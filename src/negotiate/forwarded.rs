//! `X-Forwarded-For` upstream: who the client is, for the apiserver's audit log.
//!
//! kube-apiserver's audit `sourceIPs` (`utilnet.SourceIPs`, k8s.io/apimachinery
//! `pkg/util/net/http.go`) are the comma-separated addresses of the *first*
//! `X-Forwarded-For` line, then `X-Real-Ip` unless already listed, then the connection's
//! remote address (here: cborgate's). So cborgate sends one `X-Forwarded-For` line:
//!
//! - `append` (the default), as Go's `httputil.ReverseProxy` does: the client's own
//!   lines joined with `", "`, then the address the client connected from. Audit shows
//!   `[what the client claimed…, the client, cborgate]`: right behind a trusted front
//!   proxy that sets the header itself.
//! - `replace`, for clients that are not trusted to say who they are: only the address
//!   the client connected from, and the client's `X-Real-Ip` is dropped. Audit shows
//!   `[the client, cborgate]`, whatever the client sent.

use std::net::{IpAddr, Ipv4Addr};

/// `server.forwarded_for`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardedFor {
    #[default]
    Append,
    Replace,
}

impl ForwardedFor {
    pub fn as_str(self) -> &'static str {
        match self {
            ForwardedFor::Append => "append",
            ForwardedFor::Replace => "replace",
        }
    }
}

/// What the upstream request's forwarding headers become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Forwarding {
    /// The one `X-Forwarded-For` line sent upstream, in place of every line the client
    /// sent; `None`: none.
    pub forwarded_for: Option<String>,
    /// Drop the client's `X-Real-Ip`.
    pub drop_real_ip: bool,
}

/// The forwarding headers for a client at `peer` (`None`: not an IP connection)
/// that sent the `X-Forwarded-For` lines `sent`, in order.
pub fn forwarding(mode: ForwardedFor, sent: &[&str], peer: Option<IpAddr>) -> Forwarding {
    let Some(peer) = peer else {
        // No address to add: the client's lines as one (append), or nothing (replace).
        let kept = mode == ForwardedFor::Append && !sent.is_empty();
        return Forwarding {
            forwarded_for: kept.then(|| sent.join(", ")),
            drop_real_ip: mode == ForwardedFor::Replace,
        };
    };
    // Go writes an IPv6 address without brackets (`net.SplitHostPort` of RemoteAddr).
    let peer = exact_text(peer.to_canonical());
    let forwarded_for = match mode {
        // `httputil.ReverseProxy`: `strings.Join(prior, ", ") + ", " + clientIP`.
        ForwardedFor::Append if !sent.is_empty() => format!("{}, {peer}", sent.join(", ")),
        _ => peer,
    };
    Forwarding {
        forwarded_for: Some(forwarded_for),
        drop_real_ip: mode == ForwardedFor::Replace,
    }
}

/// An IPv4 address as its `Display` writes it (`10.0.99.100`), written into `buf`: every
/// request's address, for `X-Forwarded-For` and the request line, with the digits by hand
/// (`forwarding` about 530 instructions a request, 1,260 through `fmt`; bench/README.md
/// "Instructions per proxied request").
pub fn ipv4_text(ip: Ipv4Addr, buf: &mut [u8; 15]) -> &str {
    let mut len = 0;
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            buf[len] = b'.';
            len += 1;
        }
        let digits = [octet / 100, octet / 10 % 10, octet % 10];
        let skip = if octet >= 100 {
            0
        } else if octet >= 10 {
            1
        } else {
            2
        };
        for d in &digits[skip..] {
            buf[len] = b'0' + d;
            len += 1;
        }
    }
    // Only ASCII digits and dots were written.
    std::str::from_utf8(&buf[..len]).unwrap_or_default()
}

/// `ip` as text in a `String` of exactly its length: formatted on the stack first, so
/// that it is one allocation and a header value can take it without copying.
fn exact_text(ip: IpAddr) -> String {
    use std::fmt::Write;
    if let IpAddr::V4(v4) = ip {
        return ipv4_text(v4, &mut [0; 15]).to_owned();
    }
    /// Long enough for any IPv6 address's text (45 bytes with an embedded IPv4).
    struct Text {
        buf: [u8; 64],
        len: usize,
    }
    impl Write for Text {
        fn write_str(&mut self, s: &str) -> std::fmt::Result {
            let end = self.len + s.len();
            self.buf
                .get_mut(self.len..end)
                .ok_or(std::fmt::Error)?
                .copy_from_slice(s.as_bytes());
            self.len = end;
            Ok(())
        }
    }
    let mut text = Text {
        buf: [0; 64],
        len: 0,
    };
    match write!(text, "{ip}") {
        // Only ASCII digits, dots, colons and hex letters were written.
        Ok(()) => String::from_utf8_lossy(&text.buf[..text.len]).into_owned(),
        Err(_) => ip.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ForwardedFor::{Append, Replace};

    /// (mode, lines the client sent, peer, X-Forwarded-For upstream, X-Real-Ip dropped)
    type Row = (
        ForwardedFor,
        &'static [&'static str],
        Option<IpAddr>,
        Option<&'static str>,
        bool,
    );

    #[test]
    fn the_forwarding_headers_of_each_mode() {
        let v4: Option<IpAddr> = Some("10.0.0.7".parse().unwrap());
        let v6: Option<IpAddr> = Some("2001:db8::7".parse().unwrap());
        let mapped: Option<IpAddr> = Some("::ffff:10.0.0.7".parse().unwrap());
        let table: &[Row] = &[
            (Append, &[], v4, Some("10.0.0.7"), false),
            (Append, &["1.2.3.4"], v4, Some("1.2.3.4, 10.0.0.7"), false),
            // Several lines: joined in order, as Go joins them.
            (
                Append,
                &["1.2.3.4", "5.6.7.8, 9.9.9.9"],
                v4,
                Some("1.2.3.4, 5.6.7.8, 9.9.9.9, 10.0.0.7"),
                false,
            ),
            // An empty line, as Go keeps it (kube-apiserver skips what is not an IP).
            (Append, &[""], v4, Some(", 10.0.0.7"), false),
            (Append, &[], v6, Some("2001:db8::7"), false),
            // An IPv4 client on a dual-stack listener is written as IPv4.
            (Append, &[], mapped, Some("10.0.0.7"), false),
            (
                Append,
                &["1.2.3.4", "5.6.7.8"],
                None,
                Some("1.2.3.4, 5.6.7.8"),
                false,
            ),
            (Append, &[], None, None, false),
            (Replace, &[], v4, Some("10.0.0.7"), true),
            (Replace, &["1.2.3.4", "5.6.7.8"], v4, Some("10.0.0.7"), true),
            (Replace, &["1.2.3.4"], v6, Some("2001:db8::7"), true),
            (Replace, &["1.2.3.4"], None, None, true),
        ];
        for &(mode, sent, peer, want, drop) in table {
            let got = forwarding(mode, sent, peer);
            assert_eq!(
                got,
                Forwarding {
                    forwarded_for: want.map(String::from),
                    drop_real_ip: drop,
                },
                "{mode:?} {sent:?} {peer:?}"
            );
        }
    }

    #[test]
    fn address_text_is_go_s_and_exactly_sized() {
        for ip in [
            "1.2.3.4",
            "255.255.255.255",
            "0.0.0.0",
            "10.0.99.100",
            "192.168.1.9",
            "::1",
            "2001:db8::7",
            "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "::ffff:1.2.3.4",
            "fe80::1:2:3:4",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            let text = exact_text(ip);
            assert_eq!(text, ip.to_string());
            assert_eq!(text.len(), text.capacity(), "{ip}");
        }
    }
}
