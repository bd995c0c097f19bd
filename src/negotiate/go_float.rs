//! Go's `strconv.ParseFloat(s, 32)`, ported for the `q` parameter of `Accept` (media.rs):
//! goautoneg reads `q` with it and ignores the error, so a bad `q` is 0 and an overflow ±Inf.
//! Decimal and hexadecimal forms, underscores between digits, `inf`, `infinity` and `nan`
//! are read as Go reads them. It follows Go's `strconv/atof.go` (`special`, `readFloat`,
//! `atofHex`) and `strconv/atoi.go` (`underscoreOK`); decimal rounding is left to Rust's
//! correctly rounded `f32` parser, which agrees with Go's.

/// Go's `strconv.ParseFloat(s, 32)` with the error ignored: a syntax error gives 0, an
/// overflow ±Inf. Decimal and hexadecimal forms, underscores between digits, `inf`,
/// `infinity` and `nan` are read as Go reads them (ported from `strconv/atof.go`).
pub(super) fn go_parse_float32(s: &str) -> f32 {
    if let Some(special) = go_special_float(s) {
        return special;
    }
    let Some(float) = go_read_float(s.as_bytes()) else {
        return 0.0;
    };
    if float.hex {
        return go_atof_hex32(float.mantissa, float.exp, float.neg, float.trunc);
    }
    // Validated Go syntax without its underscores is valid Rust syntax, and both round
    // correctly to the nearest float32.
    let digits: String = s.chars().filter(|&c| c != '_').collect();
    digits.parse::<f32>().unwrap_or(0.0)
}

/// Go's `special`: `[+-]inf`, `[+-]infinity`, `nan`, any case, and nothing after.
fn go_special_float(s: &str) -> Option<f32> {
    let (sign, body) = match s.as_bytes().first() {
        Some(b'+') => (1.0, s.get(1..)?),
        Some(b'-') => (-1.0, s.get(1..)?),
        _ => (1.0, s),
    };
    if body.eq_ignore_ascii_case("inf") || body.eq_ignore_ascii_case("infinity") {
        return Some(sign * f32::INFINITY);
    }
    if body.len() == s.len() && body.eq_ignore_ascii_case("nan") {
        return Some(f32::NAN);
    }
    None
}

/// What Go's `readFloat` reads from a number.
struct GoFloat {
    mantissa: u64,
    exp: i64,
    neg: bool,
    trunc: bool,
    hex: bool,
}

/// Go's `readFloat`, requiring the whole input to be the number.
fn go_read_float(s: &[u8]) -> Option<GoFloat> {
    let mut i = 0;
    let mut neg = false;
    match s.first()? {
        b'+' => i = 1,
        b'-' => {
            neg = true;
            i = 1;
        }
        _ => {}
    }
    let hex = i + 2 < s.len()
        && s.get(i) == Some(&b'0')
        && s.get(i + 1).map(u8::to_ascii_lowercase) == Some(b'x');
    let (base, max_mant_digits, exp_char) = if hex { (16, 16, b'p') } else { (10, 19, b'e') };
    if hex {
        i += 2;
    }
    let (mut underscores, mut saw_dot, mut saw_digits, mut trunc) = (false, false, false, false);
    let (mut nd, mut nd_mant, mut dp) = (0_i64, 0_i64, 0_i64);
    let mut mantissa = 0_u64;
    while let Some(&c) = s.get(i) {
        let lower = c.to_ascii_lowercase();
        if c == b'_' {
            underscores = true;
        } else if c == b'.' {
            if saw_dot {
                break;
            }
            saw_dot = true;
            dp = nd;
        } else if c.is_ascii_digit() || (hex && (b'a'..=b'f').contains(&lower)) {
            saw_digits = true;
            if c == b'0' && nd == 0 {
                // Leading zeros.
                dp -= 1;
                i += 1;
                continue;
            }
            nd += 1;
            let digit = if c.is_ascii_digit() {
                c - b'0'
            } else {
                lower - b'a' + 10
            };
            if nd_mant < max_mant_digits {
                // At most 19 decimal or 16 hex digits: no overflow.
                mantissa = mantissa * base + u64::from(digit);
                nd_mant += 1;
            } else if digit != 0 {
                trunc = true;
            }
        } else {
            break;
        }
        i += 1;
    }
    if !saw_digits {
        return None;
    }
    if !saw_dot {
        dp = nd;
    }
    if hex {
        dp *= 4;
        nd_mant *= 4;
    }
    if s.get(i).map(u8::to_ascii_lowercase) == Some(exp_char) {
        i += 1;
        let mut sign = 1;
        match s.get(i) {
            Some(b'+') => i += 1,
            Some(b'-') => {
                i += 1;
                sign = -1;
            }
            _ => {}
        }
        if !s.get(i).is_some_and(u8::is_ascii_digit) {
            return None;
        }
        let mut e = 0_i64;
        while let Some(&c) = s.get(i) {
            if c == b'_' {
                underscores = true;
            } else if c.is_ascii_digit() {
                if e < 10_000 {
                    e = e * 10 + i64::from(c - b'0');
                }
            } else {
                break;
            }
            i += 1;
        }
        dp += e * sign;
    } else if hex {
        // A hexadecimal mantissa needs a `p` exponent.
        return None;
    }
    let exp = if mantissa != 0 { dp - nd_mant } else { 0 };
    if underscores && !go_underscore_ok(s.get(..i)?) {
        return None;
    }
    (i == s.len()).then_some(GoFloat {
        mantissa,
        exp,
        neg,
        trunc,
        hex,
    })
}

/// Go's `underscoreOK`: underscores only between digits, or after a base prefix.
fn go_underscore_ok(s: &[u8]) -> bool {
    let s = match s.first() {
        Some(b'+' | b'-') => s.get(1..).unwrap_or_default(),
        _ => s,
    };
    let prefix = s.get(1).map(u8::to_ascii_lowercase);
    let (mut saw, mut i, hex) =
        if s.len() >= 2 && s.first() == Some(&b'0') && matches!(prefix, Some(b'b' | b'o' | b'x')) {
            (b'0', 2, prefix == Some(b'x'))
        } else {
            (b'^', 0, false)
        };
    while let Some(&c) = s.get(i) {
        i += 1;
        if c.is_ascii_digit() || (hex && (b'a'..=b'f').contains(&c.to_ascii_lowercase())) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else if saw == b'_' {
            return false;
        } else {
            saw = b'!';
        }
    }
    saw != b'_'
}

/// Go's `atofHex` for float32: rounds `mantissa * 2^exp` to nearest even, `trunc` being a
/// sticky bit for digits beyond the mantissa; overflow gives ±Inf.
fn go_atof_hex32(mut mantissa: u64, mut exp: i64, neg: bool, trunc: bool) -> f32 {
    const MANT_BITS: u32 = 23;
    const EXP_BITS: u32 = 8;
    const BIAS: i64 = -127;
    let max_exp = (1 << EXP_BITS) + BIAS - 2;
    let min_exp = BIAS + 1;
    exp += i64::from(MANT_BITS);
    while mantissa != 0 && mantissa >> (MANT_BITS + 2) == 0 {
        mantissa <<= 1;
        exp -= 1;
    }
    if trunc {
        mantissa |= 1;
    }
    while mantissa >> (1 + MANT_BITS + 2) != 0 {
        mantissa = (mantissa >> 1) | (mantissa & 1);
        exp += 1;
    }
    while mantissa > 1 && exp < min_exp - 2 {
        mantissa = (mantissa >> 1) | (mantissa & 1);
        exp += 1;
    }
    let mut round = mantissa & 3;
    mantissa >>= 2;
    round |= mantissa & 1;
    exp += 2;
    if round == 3 {
        mantissa += 1;
        if mantissa == 1 << (1 + MANT_BITS) {
            mantissa >>= 1;
            exp += 1;
        }
    }
    if mantissa >> MANT_BITS == 0 {
        exp = BIAS;
    }
    if exp > max_exp {
        mantissa = 1 << MANT_BITS;
        exp = max_exp + 1;
    }
    let mut bits = mantissa & ((1 << MANT_BITS) - 1);
    bits |= u64::try_from((exp - BIAS) & ((1 << EXP_BITS) - 1)).unwrap_or(0) << MANT_BITS;
    if neg {
        bits |= 1 << (MANT_BITS + EXP_BITS);
    }
    f32::from_bits(u32::try_from(bits).unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_like_go_parse_float_32() {
        assert_eq!(
            go_parse_float32("1_0"),
            10.0,
            "Go reads underscores between digits"
        );
        assert_eq!(go_parse_float32("0.2_5"), 0.25);
        assert_eq!(go_parse_float32("0_0.5"), 0.5);
        for bad in [
            "1__0", "_1", "1_", "1e+_5", "1e_5", "0x1_p0", "1_.5", "1._5", ".e1", "0b1", "0o7",
        ] {
            assert_eq!(go_parse_float32(bad), 0.0, "{bad}");
        }
        assert_eq!(go_parse_float32("1e1_0"), 1e10);
        assert_eq!(go_parse_float32("0x1p-1"), 0.5, "and hexadecimal floats");
        assert_eq!(go_parse_float32("0x_1p-1"), 0.5);
        assert_eq!(go_parse_float32("0x1p1_0"), 1024.0);
        assert_eq!(go_parse_float32("-0X.8P1"), -1.0);
        assert_eq!(go_parse_float32("0x1.fffffffp0"), 2.0, "rounded to float32");
        assert_eq!(go_parse_float32("0x1.fffffep127"), f32::MAX);
        assert_eq!(go_parse_float32("0x1.ffffffp127"), f32::INFINITY);
        assert_eq!(go_parse_float32("0x1p-200"), 0.0);
        assert_eq!(
            go_parse_float32("0x1"),
            0.0,
            "a hex mantissa needs an exponent"
        );
        assert_eq!(go_parse_float32("0x"), 0.0);
        assert_eq!(go_parse_float32("1e99999999999999999999"), f32::INFINITY);
        assert_eq!(go_parse_float32("1e-50"), 0.0);
        assert_eq!(go_parse_float32("00.5"), 0.5);
        assert_eq!(go_parse_float32("1e"), 0.0);
        assert_eq!(go_parse_float32("1e400"), f32::INFINITY);
        assert_eq!(go_parse_float32("-Inf"), f32::NEG_INFINITY);
        assert_eq!(go_parse_float32("infinity"), f32::INFINITY);
        assert_eq!(go_parse_float32("infin"), 0.0);
        assert!(go_parse_float32("NaN").is_nan());
        assert_eq!(go_parse_float32("+nan"), 0.0, "Go has no signed NaN");
    }
}
