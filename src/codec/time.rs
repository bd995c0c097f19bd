//! CBOR time tags as Kubernetes decodes them: tag 0 (RFC 3339 text) and tag 1
//! (epoch seconds) both become an RFC 3339 string formatted like Go's
//! `time.RFC3339Nano` (trailing fractional zeros dropped, `Z` for a zero
//! offset). Parsing follows Go's `time.Parse(time.RFC3339, …)`.

/// Longest tag-0 text we accept (Go accepts any number of fraction digits but
/// only reads nine; nothing legitimate comes close to this).
pub(crate) const MAX_TIME_TEXT: usize = 256;

fn is_leap(y: i64) -> bool {
    y % 4 == 0 && (y % 100 != 0 || y % 400 == 0)
}

fn days_in(month: i64, year: i64) -> i64 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

fn digits(s: &[u8]) -> Option<i64> {
    let mut v = 0i64;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (b - b'0') as i64;
    }
    Some(v)
}

fn ranged(s: &[u8], lo: i64, hi: i64) -> Option<i64> {
    digits(s).filter(|v| (lo..=hi).contains(v))
}

struct Civil {
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    min: i64,
    sec: i64,
    nanos: u32,
    /// Offset east of UTC in minutes.
    offset_min: i64,
}

fn write_civil(out: &mut Vec<u8>, c: &Civil) {
    use std::io::Write as _;
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        c.year, c.month, c.day, c.hour, c.min, c.sec
    );
    if c.nanos > 0 {
        let mut frac = format!("{:09}", c.nanos);
        while frac.ends_with('0') {
            frac.pop();
        }
        out.push(b'.');
        out.extend_from_slice(frac.as_bytes());
    }
    if c.offset_min == 0 {
        out.push(b'Z');
    } else {
        let sign = if c.offset_min < 0 { '-' } else { '+' };
        let m = c.offset_min.abs();
        let _ = write!(out, "{sign}{:02}:{:02}", m / 60, m % 60);
    }
}

/// Re-format RFC 3339 text as Go's RFC3339Nano would print the parsed time.
/// `None` if Go's parser would reject it.
pub(crate) fn rfc3339_to_nano(s: &[u8], out: &mut Vec<u8>) -> Option<()> {
    if s.len() < 20 {
        return None;
    }
    if !(s[4] == b'-' && s[7] == b'-' && s[10] == b'T' && s[13] == b':' && s[16] == b':') {
        return None;
    }
    let year = ranged(&s[0..4], 0, 9999)?;
    let month = ranged(&s[5..7], 1, 12)?;
    let day = ranged(&s[8..10], 1, days_in(month, year))?;
    let hour = ranged(&s[11..13], 0, 23)?;
    let min = ranged(&s[14..16], 0, 59)?;
    let sec = ranged(&s[17..19], 0, 59)?;
    let mut rest = &s[19..];
    let mut nanos = 0u32;
    if rest.len() >= 2 && rest[0] == b'.' && rest[1].is_ascii_digit() {
        let n = 1 + rest[1..].iter().take_while(|b| b.is_ascii_digit()).count();
        let frac = &rest[1..n];
        let mut v = 0u32;
        for i in 0..9 {
            v = v * 10 + frac.get(i).map_or(0, |&b| (b - b'0') as u32);
        }
        nanos = v;
        rest = &rest[n..];
    }
    let offset_min = if rest == b"Z" {
        0
    } else {
        if rest.len() != 6 || !(rest[0] == b'+' || rest[0] == b'-') || rest[3] != b':' {
            return None;
        }
        let h = ranged(&rest[1..3], 0, 23)?;
        let m = ranged(&rest[4..6], 0, 59)?;
        let off = h * 60 + m;
        if rest[0] == b'-' {
            -off
        } else {
            off
        }
    };
    write_civil(
        out,
        &Civil {
            year,
            month,
            day,
            hour,
            min,
            sec,
            nanos,
            offset_min,
        },
    );
    Some(())
}

/// Seconds of 0000-01-01T00:00:00Z and of 10000-01-01T00:00:00Z.
const MIN_UNIX: i64 = -62_167_219_200;
const END_UNIX: i64 = 253_402_300_800;

/// Days since 1970-01-01 → (year, month, day) (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn unix_to_nano(secs: i64, nanos: u32, out: &mut Vec<u8>) -> Option<()> {
    if !(MIN_UNIX..END_UNIX).contains(&secs) {
        return None;
    }
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    write_civil(
        out,
        &Civil {
            year,
            month,
            day,
            hour: rem / 3600,
            min: (rem % 3600) / 60,
            sec: rem % 60,
            nanos,
            offset_min: 0,
        },
    );
    Some(())
}

/// Tag 1 with integer content.
pub(crate) fn epoch_int_to_nano(secs: i128, out: &mut Vec<u8>) -> Option<()> {
    let secs = i64::try_from(secs).ok()?;
    unix_to_nano(secs, 0, out)
}

/// Tag 1 with float content: Go's `time.Unix(int64(whole), int64(frac*1e9))`.
pub(crate) fn epoch_float_to_nano(f: f64, out: &mut Vec<u8>) -> Option<()> {
    if !f.is_finite() || f < (MIN_UNIX - 1) as f64 || f >= END_UNIX as f64 {
        return None;
    }
    let whole = f.trunc();
    let frac = f - whole;
    let mut secs = whole as i64;
    let mut nanos = (frac * 1e9) as i64; // truncates toward zero, like Go
    if nanos < 0 {
        secs -= 1;
        nanos += 1_000_000_000;
    }
    unix_to_nano(secs, nanos as u32, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t0(s: &str) -> Option<String> {
        let mut v = Vec::new();
        rfc3339_to_nano(s.as_bytes(), &mut v).map(|_| String::from_utf8(v).unwrap())
    }

    #[test]
    fn tag0_reformats_like_go() {
        assert_eq!(
            t0("2013-03-21T20:04:00Z").as_deref(),
            Some("2013-03-21T20:04:00Z")
        );
        assert_eq!(
            t0("2013-03-21T20:04:00.500Z").as_deref(),
            Some("2013-03-21T20:04:00.5Z")
        );
        assert_eq!(
            t0("2013-03-21T20:04:00.000+01:30").as_deref(),
            Some("2013-03-21T20:04:00+01:30")
        );
        assert_eq!(
            t0("2013-03-21T20:04:00-00:00").as_deref(),
            Some("2013-03-21T20:04:00Z")
        );
        assert_eq!(
            t0("2013-03-21T20:04:00.1234567891234Z").as_deref(),
            Some("2013-03-21T20:04:00.123456789Z")
        );
        assert_eq!(t0("2013-02-29T20:04:00Z"), None);
        assert_eq!(
            t0("2012-02-29T20:04:00Z").as_deref(),
            Some("2012-02-29T20:04:00Z")
        );
        assert_eq!(t0("2013-03-21t20:04:00Z"), None);
        assert_eq!(t0("2013-03-21T24:04:00Z"), None);
        assert_eq!(t0("2013-03-21T20:04:00"), None);
        assert_eq!(t0("2013-03-21T20:04:00+0100"), None);
    }

    #[test]
    fn tag1_epochs() {
        let f = |x: f64| {
            let mut v = Vec::new();
            epoch_float_to_nano(x, &mut v).map(|_| String::from_utf8(v).unwrap())
        };
        let i = |x: i128| {
            let mut v = Vec::new();
            epoch_int_to_nano(x, &mut v).map(|_| String::from_utf8(v).unwrap())
        };
        assert_eq!(i(1363896240).as_deref(), Some("2013-03-21T20:04:00Z"));
        assert_eq!(f(1363896240.5).as_deref(), Some("2013-03-21T20:04:00.5Z"));
        assert_eq!(f(-1.5).as_deref(), Some("1969-12-31T23:59:58.5Z"));
        assert_eq!(i(0).as_deref(), Some("1970-01-01T00:00:00Z"));
        assert_eq!(i(MIN_UNIX as i128).as_deref(), Some("0000-01-01T00:00:00Z"));
        assert_eq!(
            i(END_UNIX as i128 - 1).as_deref(),
            Some("9999-12-31T23:59:59Z")
        );
        assert_eq!(i(END_UNIX as i128), None);
        assert_eq!(i(MIN_UNIX as i128 - 1), None);
        assert_eq!(f(f64::NAN), None);
        assert_eq!(f(1e300), None);
    }
}
