//! Each request's log line (docs/surface.md "Logs"), written by the log itself rather than
//! as a `tracing` event: the same line, in the same format (text or JSON) and through the
//! same queue as every other line, but formatted straight into a reused buffer. A
//! `tracing` event per request cost about 12,000 instructions in dispatch and
//! field-by-field formatting (callgrind, bench/README.md "Instructions per proxied request"); this costs
//! a fraction of that. `the_line_is_the_one_tracing_writes` keeps the two the same.
//!
//! Request lines are never coloured, even on a terminal.

use super::logs::{write_debug_str, write_escaped, write_float, Log, Queue};
use crate::config::LogFormat;
use crate::proxy::request_log::{decimal, ipv4_text, Client, Line, Lines};
use std::cell::RefCell;
use std::fmt::{self, Write as _};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The log's request lines: formatted here, queued for the log's writer thread.
pub struct RequestLines {
    queue: Queue,
    json: bool,
}

thread_local! {
    /// One line's text, reused from request to request on each worker thread.
    static TEXT: RefCell<String> = const { RefCell::new(String::new()) };
}

/// A line longer than this gives its buffer back once written.
const KEEP: usize = 16 << 10;

impl RequestLines {
    /// The request lines `log` wants, if it wants them.
    pub fn of(log: &Log) -> Option<Arc<dyn Lines>> {
        let (queue, format) = log.requests.clone()?;
        Some(Arc::new(RequestLines {
            queue,
            json: format == LogFormat::Json,
        }))
    }

    /// Formats `line` into `out` and queues it.
    fn queue_in(&self, out: &mut String, line: &Line<'_>) {
        let now = SystemTime::now();
        // Writing into a String does not fail.
        let _ = if self.json {
            json(out, now, line)
        } else {
            text(out, now, line)
        };
        self.queue.line(out.as_bytes());
    }
}

impl Lines for RequestLines {
    fn write(&self, line: &Line<'_>) {
        TEXT.with(|t| match t.try_borrow_mut() {
            Ok(mut t) => {
                t.clear();
                self.queue_in(&mut t, line);
                if t.capacity() > KEEP {
                    *t = String::new();
                }
            }
            // Only were a line written while another is formatted on the same thread.
            Err(_) => self.queue_in(&mut String::new(), line),
        });
    }
}

/// The target every request line carries.
const TARGET: &str = "cborgate::proxy";

/// tracing-subscriber's full text format, as `ops::logs`'s `TextFields` writes the
/// fields: `2026-11-28T18:55:21.287342Z  INFO cborgate::proxy: request method=GET …`.
fn text(out: &mut String, now: SystemTime, l: &Line<'_>) -> fmt::Result {
    timestamp(out, now)?;
    out.push_str("  INFO ");
    out.push_str(TARGET);
    out.push_str(": request method=");
    // `%` fields (method, path, client) are written as they are; strings quoted.
    out.push_str(l.method);
    out.push_str(" path=");
    out.push_str(l.path);
    out.push_str(" status=");
    integer(out, l.status.into())?;
    let quoted = |out: &mut String, name: &str, v: &str| {
        out.push(' ');
        out.push_str(name);
        out.push('=');
        write_debug_str(out, v)
    };
    quoted(out, "verb", l.verb)?;
    quoted(out, "request_format", l.request_format)?;
    quoted(out, "response_format", l.response_format)?;
    for (name, d) in [
        (" upstream_ms=", l.upstream),
        (" codec_ms=", l.codec),
        (" total_ms=", l.total),
    ] {
        out.push_str(name);
        millis(out, d)?;
    }
    if let Some(c) = l.client {
        out.push_str(" client=");
        client(out, c)?;
    }
    for (name, v) in last_strings(l)
        .into_iter()
        .filter_map(|(n, v)| Some((n, v?)))
    {
        quoted(out, name, v)?;
    }
    out.push('\n');
    Ok(())
}

/// The string fields after the client, in their order; `None` is left out.
fn last_strings<'a>(l: &Line<'a>) -> [(&'static str, Option<&'a str>); 6] {
    [
        ("user_agent", l.user_agent),
        ("auth", Some(l.auth)),
        ("user", l.user),
        ("error", l.error),
        ("reason", l.reason),
        ("ended", l.ended),
    ]
}

/// `ops::logs`'s flat JSON: `timestamp`, `level`, `target`, `message`, then the fields.
fn json(out: &mut String, now: SystemTime, l: &Line<'_>) -> fmt::Result {
    out.push_str("{\"timestamp\":\"");
    timestamp(out, now)?;
    out.push_str("\",\"level\":\"INFO\",\"target\":\"");
    out.push_str(TARGET);
    out.push_str("\",\"message\":\"request\"");
    let string = |out: &mut String, name: &str, v: &str| {
        out.push_str(",\"");
        out.push_str(name);
        out.push_str("\":\"");
        write_escaped(out, v)?;
        out.push('"');
        Ok::<(), fmt::Error>(())
    };
    string(out, "method", l.method)?;
    string(out, "path", l.path)?;
    out.push_str(",\"status\":");
    integer(out, l.status.into())?;
    string(out, "verb", l.verb)?;
    string(out, "request_format", l.request_format)?;
    string(out, "response_format", l.response_format)?;
    for (name, d) in [
        (",\"upstream_ms\":", l.upstream),
        (",\"codec_ms\":", l.codec),
        (",\"total_ms\":", l.total),
    ] {
        out.push_str(name);
        millis(out, d)?;
    }
    if let Some(c) = l.client {
        out.push_str(",\"client\":\"");
        match c {
            Client::Other(c) => write!(super::logs::Escaped(out), "{c}")?,
            inet => client(out, inet)?,
        }
        out.push('"');
    }
    for (name, v) in last_strings(l)
        .into_iter()
        .filter_map(|(n, v)| Some((n, v?)))
    {
        string(out, name, v)?;
    }
    out.push_str("}\n");
    Ok(())
}

/// The client's address as its `Display` writes it (`127.0.0.1:33072`,
/// `[2001:db8::7]:40112`), an IPv4 one without the formatting machinery.
fn client(out: &mut String, c: Client<'_>) -> fmt::Result {
    match c {
        Client::Inet(std::net::SocketAddr::V4(a)) => {
            out.push_str(ipv4_text(*a.ip(), &mut [0; 15]));
            out.push(':');
            integer(out, a.port().into())
        }
        Client::Inet(a) => write!(out, "{a}"),
        Client::Other(a) => write!(out, "{a}"),
    }
}

/// An integer in decimal.
fn integer(out: &mut String, n: u64) -> fmt::Result {
    out.push_str(decimal(n, &mut [0; 20]));
    Ok(())
}

/// Milliseconds rounded to the microsecond, as the number `write_float` writes for
/// `micros as f64 / 1000.0`: `0.036`, `1.5`, `2.0`, never `0.035667000000000004`.
/// Beyond 2^53 microseconds (285 years) the float's own text.
fn millis(out: &mut String, d: Duration) -> fmt::Result {
    let us = d.as_micros();
    if us >= 1 << 53 {
        return write_float(out, us as f64 / 1000.0);
    }
    let us = us as u64;
    integer(out, us / 1000)?;
    out.push('.');
    let frac = us % 1000;
    if frac == 0 {
        out.push('0');
        return Ok(());
    }
    let digits = [frac / 100, frac / 10 % 10, frac % 10];
    let last = if digits[2] != 0 {
        3
    } else if digits[1] != 0 {
        2
    } else {
        1
    };
    for d in &digits[..last] {
        out.push(char::from(b'0' + *d as u8));
    }
    Ok(())
}

/// RFC 3339 in UTC to the microsecond, as tracing-subscriber's `SystemTime` writes it:
/// `2026-11-28T18:55:21.287342Z`.
fn timestamp(out: &mut String, now: SystemTime) -> fmt::Result {
    let since = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil(days);
    let two = |out: &mut String, n: u64| {
        out.push(char::from(b'0' + (n / 10 % 10) as u8));
        out.push(char::from(b'0' + (n % 10) as u8));
    };
    integer(out, year)?;
    out.push('-');
    two(out, month);
    out.push('-');
    two(out, day);
    out.push('T');
    two(out, rem / 3600);
    out.push(':');
    two(out, rem / 60 % 60);
    out.push(':');
    two(out, rem % 60);
    out.push('.');
    let micros = u64::from(since.subsec_micros());
    for div in [100_000, 10_000, 1_000, 100, 10, 1] {
        out.push(char::from(b'0' + (micros / div % 10) as u8));
    }
    out.push('Z');
    Ok(())
}

/// The proleptic Gregorian date of a day counted from 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for days on or after the epoch).
fn civil(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogLevel;
    use crate::ops::logs::tests::Capture;

    /// The line the process's subscriber writes for a `tracing` event with `l`'s fields
    /// (what the request line was before it was written here), its timestamp cut off.
    fn through_tracing(format: LogFormat, l: &Line<'_>) -> String {
        let out = Capture::default();
        let w = out.clone();
        let filter = super::super::logs::default_filter(LogLevel::Info);
        let sub = super::super::logs::subscriber(format, filter, false, move || w.clone());
        let ms = |d: Duration| d.as_micros() as f64 / 1000.0;
        tracing::subscriber::with_default(sub, || {
            tracing::info!(
                target: "cborgate::proxy",
                method = %l.method,
                path = %l.path,
                status = l.status,
                verb = l.verb,
                request_format = l.request_format,
                response_format = l.response_format,
                upstream_ms = ms(l.upstream),
                codec_ms = ms(l.codec),
                total_ms = ms(l.total),
                client = l.client.map(|c| tracing::field::display(match c {
                    Client::Inet(a) => a.to_string(),
                    Client::Other(a) => a.to_string(),
                })),
                user_agent = l.user_agent,
                auth = l.auth,
                user = l.user,
                error = l.error,
                reason = l.reason,
                ended = l.ended,
                "request"
            )
        });
        untimed(&out.text())
    }

    fn untimed(line: &str) -> String {
        let at = line.find('Z').expect("a timestamp");
        line[at..].to_string()
    }

    #[test]
    fn the_line_is_the_one_tracing_writes() {
        let v6: std::net::SocketAddr = "[2001:db8::7]:40112".parse().unwrap();
        let v4: std::net::SocketAddr = "10.0.255.7:6443".parse().unwrap();
        let unix = "/run/cborgate.sock";
        let plain = Line {
            method: "GET",
            path: "/api/v1/namespaces/load/pods/pod-0",
            status: 200,
            verb: "GET",
            request_format: "none",
            response_format: "json",
            upstream: Duration::from_micros(1_697),
            codec: Duration::ZERO,
            total: Duration::from_micros(2_000),
            client: Some(Client::Inet(v4)),
            user_agent: None,
            auth: "none",
            user: None,
            error: None,
            reason: None,
            ended: None,
        };
        let full = Line {
            method: "PATCH",
            path: "/api/v1/namespaces/d\\emo/configmaps/\u{e9}",
            status: 503,
            verb: "PATCH",
            request_format: "cbor",
            response_format: "cbor",
            upstream: Duration::from_nanos(12_345_678_901),
            codec: Duration::from_micros(36),
            total: Duration::from_secs(86_400),
            client: Some(Client::Inet(v6)),
            user_agent: Some("kubectl/v1.36.3 \"x\"\\ \u{fc}\u{1}\n"),
            auth: "x509",
            user: Some("system:kube-controller-manager"),
            error: Some("upstream: connection refused"),
            reason: Some("the upstream\tclosed"),
            ended: Some("shutdown"),
        };
        let other = Line {
            client: Some(Client::Other(&unix)),
            ..full
        };
        let none = Line {
            client: None,
            ..plain
        };
        for l in [&plain, &full, &other, &none] {
            for format in [LogFormat::Text, LogFormat::Json] {
                let mut ours = String::new();
                let now = SystemTime::now();
                match format {
                    LogFormat::Json => json(&mut ours, now, l),
                    LogFormat::Text => text(&mut ours, now, l),
                }
                .unwrap();
                assert_eq!(untimed(&ours), through_tracing(format, l), "{format:?}");
            }
        }
    }

    fn millis_text(d: Duration) -> String {
        let mut s = String::new();
        millis(&mut s, d).unwrap();
        s
    }

    #[test]
    fn milliseconds_are_written_as_the_float_would_be() {
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut samples: Vec<u64> = (0..3000)
            .chain([999_999, 1_000_000, 86_400_000_000])
            .collect();
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            samples.push(x % 10_000_000_000_000);
        }
        for us in samples {
            let d = Duration::from_micros(us);
            let mut want = String::new();
            write_float(&mut want, us as f64 / 1000.0).unwrap();
            assert_eq!(millis_text(d), want, "{us} µs");
        }
        // Nanoseconds below a microsecond are dropped, as `as_micros` drops them.
        assert_eq!(millis_text(Duration::from_nanos(1_999)), "0.001");
    }

    #[test]
    fn timestamps_are_rfc3339_utc_to_the_microsecond() {
        for (secs, micros, want) in [
            (0, 0, "1970-01-01T00:00:00.000000Z"),
            (951_782_400, 5, "2000-02-29T00:00:00.000005Z"),
            (1_764_355_521, 287_342, "2025-11-28T18:45:21.287342Z"),
            (1_795_891_521, 999_999, "2026-11-28T18:45:21.999999Z"),
            (4_107_542_399, 1, "2100-02-28T23:59:59.000001Z"),
            (4_107_542_400, 0, "2100-03-01T00:00:00.000000Z"),
        ] {
            let t = UNIX_EPOCH + Duration::new(secs, micros * 1000);
            let mut s = String::new();
            timestamp(&mut s, t).unwrap();
            assert_eq!(s, want);
        }
    }
}
