//! Numbers the way libc and libstdc++ see them: `strtod` prefixes (the
//! lexer's notion of a number), `std::stod` / `std::stoll` conversions with
//! their two failure modes, and `operator<<` of a double in an `IValue`.
//!
//! Note [Why emulate libc]
//! PyTorch's lexer decides where a number token ends by calling `strtod`, so
//! `0x1p3`, `1.`, `.5` and `1e5` are numbers, `1e` is the number `1`
//! followed by the identifier `e`, and `1j` is a complex literal.  Defaults
//! are then converted with `std::stod` / `std::stoll`, which parse only a
//! prefix (`stoll("1.5") == 1`, so `int[1.5]` means `int[1]`) and throw
//! `invalid_argument` (Python `ValueError`) or `out_of_range` (`IndexError`).
//! Reproducing those rules is what makes odd inputs behave like PyTorch.

/// Why a `stod` / `stoll` conversion failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ConvError {
    /// `std::invalid_argument`: no digits at all.
    Invalid,
    /// `std::out_of_range`: `errno == ERANGE`.
    Range,
}

fn is_hex(c: u8) -> bool {
    c.is_ascii_hexdigit()
}

fn at(s: &[u8], i: usize) -> u8 {
    s.get(i).copied().unwrap_or(0)
}

/// Length of the exponent part `[eEpP][+-]?digits` starting at `i`, or 0.
fn exponent_len(s: &[u8], i: usize, marks: [u8; 2]) -> usize {
    if !marks.contains(&at(s, i)) {
        return 0;
    }
    let mut k = i + 1;
    if matches!(at(s, k), b'+' | b'-') {
        k += 1;
    }
    if !at(s, k).is_ascii_digit() {
        return 0;
    }
    while at(s, k).is_ascii_digit() {
        k += 1;
    }
    k - i
}

/// Length of the longest prefix of `s` that C's `strtod` converts, ignoring
/// a sign and the `inf`/`nan` spellings (the lexer never starts a number
/// with a sign or a letter).  0 means "not a number".
pub(crate) fn strtod_prefix_len(s: &[u8]) -> usize {
    if at(s, 0) == b'0' && matches!(at(s, 1), b'x' | b'X') {
        let mut j = 2;
        let mut digits = 0;
        while is_hex(at(s, j)) {
            j += 1;
            digits += 1;
        }
        if at(s, j) == b'.' {
            j += 1;
            while is_hex(at(s, j)) {
                j += 1;
                digits += 1;
            }
        }
        if digits > 0 {
            return j + exponent_len(s, j, [b'p', b'P']);
        }
        // "0x" without hex digits: strtod reads just the "0".
    }
    let mut j = 0;
    let mut digits = 0;
    while at(s, j).is_ascii_digit() {
        j += 1;
        digits += 1;
    }
    if at(s, j) == b'.' {
        j += 1;
        while at(s, j).is_ascii_digit() {
            j += 1;
            digits += 1;
        }
    }
    if digits == 0 {
        return 0;
    }
    j + exponent_len(s, j, [b'e', b'E'])
}

/// `std::stod(text)`: parse the longest valid prefix.
pub(crate) fn stod(text: &str) -> Result<f64, ConvError> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() && is_c_space(b[i]) {
        i += 1;
    }
    let neg = match at(b, i) {
        b'-' => {
            i += 1;
            true
        }
        b'+' => {
            i += 1;
            false
        }
        _ => false,
    };
    let body = &b[i..];
    let len = strtod_prefix_len(body);
    if len == 0 {
        return Err(ConvError::Invalid);
    }
    let digits = &body[..len];
    let (value, inexact_tiny) = if len > 2 && digits[0] == b'0' && matches!(digits[1], b'x' | b'X')
    {
        hex_to_f64(&digits[2..])
    } else {
        // The prefix is pure ASCII decimal syntax that Rust's parser accepts.
        let s = std::str::from_utf8(digits).map_err(|_| ConvError::Invalid)?;
        let v: f64 = s.parse().map_err(|_| ConvError::Invalid)?;
        let nonzero = digits
            .iter()
            .take_while(|c| !matches!(c, b'e' | b'E'))
            .any(|c| matches!(c, b'1'..=b'9'));
        (v, nonzero && (v == 0.0 || v.is_subnormal()))
    };
    if value.is_infinite() || inexact_tiny {
        return Err(ConvError::Range);
    }
    Ok(if neg { -value } else { value })
}

/// Converts hex-float digits (after `0x`) to the nearest double, reporting
/// whether the result underflowed inexactly (glibc's ERANGE condition).
fn hex_to_f64(s: &[u8]) -> (f64, bool) {
    // Collect up to 64 significant bits; remember whether anything nonzero
    // was dropped (sticky bit) for correct rounding.
    let mut mant: u64 = 0;
    let mut exp2: i64 = 0;
    let mut sticky = false;
    let mut seen_point = false;
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == b'.' {
            seen_point = true;
        } else if let Some(d) = (c as char).to_digit(16) {
            if mant >> 60 == 0 {
                mant = (mant << 4) | u64::from(d);
                if seen_point {
                    exp2 -= 4;
                }
            } else {
                sticky |= d != 0;
                if !seen_point {
                    exp2 += 4;
                }
            }
        } else {
            break;
        }
        i += 1;
    }
    if i < s.len() && matches!(s[i], b'p' | b'P') {
        let e = &s[i + 1..];
        let (neg, digits) = match e.first() {
            Some(b'-') => (true, &e[1..]),
            Some(b'+') => (false, &e[1..]),
            _ => (false, e),
        };
        let mut v: i64 = 0;
        for &d in digits {
            v = (v * 10 + i64::from(d - b'0')).min(1 << 40);
        }
        exp2 += if neg { -v } else { v };
    }
    if mant == 0 {
        return (0.0, false);
    }
    // Normalise so the top bit is bit 63.
    let shift = mant.leading_zeros() as i64;
    mant <<= shift;
    exp2 -= shift;
    // value = mant * 2^exp2, mant in [2^63, 2^64): unbiased exponent of the
    // leading bit is exp2 + 63.
    let lead = exp2 + 63;
    if lead > 1023 {
        return (f64::INFINITY, false);
    }
    // Number of mantissa bits kept: 53 for normals, fewer for subnormals.
    let keep: i64 = if lead >= -1022 {
        53
    } else {
        53 - (-1022 - lead)
    };
    if keep <= 0 {
        // Rounds to zero or to the smallest subnormal.
        let half_way = keep == 0 && (mant > 1 << 63 || (mant == 1 << 63 && sticky));
        let v = if half_way { f64::from_bits(1) } else { 0.0 };
        return (v, true);
    }
    let drop = 64 - keep;
    let kept = mant >> drop;
    let rem = mant & ((1u64 << drop) - 1);
    let half = 1u64 << (drop - 1);
    let inexact = rem != 0 || sticky;
    let round_up = rem > half || (rem == half && (sticky || kept & 1 == 1));
    let mut kept = kept + u64::from(round_up);
    let mut lead = lead;
    if kept >> keep != 0 {
        kept >>= 1;
        lead += 1;
        if lead > 1023 {
            return (f64::INFINITY, false);
        }
    }
    let value = if lead >= -1022 && keep == 53 {
        let bits = ((lead + 1023) as u64) << 52 | (kept & ((1 << 52) - 1));
        f64::from_bits(bits)
    } else {
        // Subnormal: kept counts units of 2^-1074.
        f64::from_bits(kept)
    };
    let tiny = value == 0.0 || value.is_subnormal() || (lead < -1022);
    (value, tiny && inexact)
}

fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// `std::stoll(text)` in base 10.
pub(crate) fn stoll(text: &str) -> Result<i64, ConvError> {
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() && is_c_space(b[i]) {
        i += 1;
    }
    let neg = match at(b, i) {
        b'-' => {
            i += 1;
            true
        }
        b'+' => {
            i += 1;
            false
        }
        _ => false,
    };
    if !at(b, i).is_ascii_digit() {
        return Err(ConvError::Invalid);
    }
    // Accumulate negatively so that i64::MIN is representable.
    let mut acc: i64 = 0;
    let mut overflow = false;
    while at(b, i).is_ascii_digit() {
        let d = i64::from(b[i] - b'0');
        match acc.checked_mul(10).and_then(|v| v.checked_sub(d)) {
            Some(v) => acc = v,
            None => overflow = true,
        }
        i += 1;
    }
    if overflow {
        return Err(ConvError::Range);
    }
    if neg {
        Ok(acc)
    } else {
        acc.checked_neg().ok_or(ConvError::Range)
    }
}

/// Writes `d` as `IValue`'s `operator<<` does: integral normal values as
/// `"<int>."`, everything else with `std::setprecision(17)` (`%.17g`).
pub(crate) fn write_ivalue_double(out: &mut String, d: f64) {
    if d == 0.0 || d.is_normal() {
        // `int64_t(d)` on x86-64 yields INT64_MIN when out of range.
        const TWO_63: f64 = 9_223_372_036_854_775_808.0; // 2^63, exact
        let i = if (-TWO_63..TWO_63).contains(&d) {
            d as i64
        } else {
            i64::MIN
        };
        if i as f64 == d {
            use std::fmt::Write;
            let _ = write!(out, "{i}.");
            return;
        }
    }
    write_g17(out, d);
}

/// `printf("%.17g", d)` with glibc's spelling of the special values.
pub(crate) fn write_g17(out: &mut String, d: f64) {
    const P: i32 = 17;
    if d.is_nan() {
        out.push_str(if d.is_sign_negative() { "-nan" } else { "nan" });
        return;
    }
    if d.is_infinite() {
        out.push_str(if d < 0.0 { "-inf" } else { "inf" });
        return;
    }
    // Rust's `{:e}` formatting is exact and rounds half to even, like glibc.
    let sci = format!("{:.*e}", (P - 1) as usize, d);
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let (neg, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => (true, m),
        None => (false, mantissa),
    };
    let digits: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    if neg {
        out.push('-');
    }
    if (-4..P).contains(&exp) {
        // Fixed notation with P - 1 - exp decimals, trailing zeros removed.
        let mut s = String::new();
        if exp >= 0 {
            let int_len = (exp + 1) as usize;
            s.extend(digits[..int_len].iter().map(|&c| c as char));
            s.push('.');
            s.extend(digits[int_len..].iter().map(|&c| c as char));
        } else {
            s.push_str("0.");
            for _ in 0..(-exp - 1) {
                s.push('0');
            }
            s.extend(digits.iter().map(|&c| c as char));
        }
        let trimmed = s.trim_end_matches('0').trim_end_matches('.');
        out.push_str(trimmed);
    } else {
        let mut m = String::new();
        m.push(digits[0] as char);
        m.push('.');
        m.extend(digits[1..].iter().map(|&c| c as char));
        out.push_str(m.trim_end_matches('0').trim_end_matches('.'));
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        let a = exp.unsigned_abs();
        if a < 10 {
            out.push('0');
        }
        use std::fmt::Write;
        let _ = write!(out, "{a}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ivalue(d: f64) -> String {
        let mut s = String::new();
        write_ivalue_double(&mut s, d);
        s
    }

    #[test]
    fn prefix() {
        assert_eq!(strtod_prefix_len(b"1.5)"), 3);
        assert_eq!(strtod_prefix_len(b"1e"), 1);
        assert_eq!(strtod_prefix_len(b"1e-05,"), 5);
        assert_eq!(strtod_prefix_len(b".5"), 2);
        assert_eq!(strtod_prefix_len(b"."), 0);
        assert_eq!(strtod_prefix_len(b"..."), 0);
        assert_eq!(strtod_prefix_len(b"0x1p3"), 5);
        assert_eq!(strtod_prefix_len(b"0x"), 1);
        assert_eq!(strtod_prefix_len(b"0x.p"), 1);
        assert_eq!(strtod_prefix_len(b"12abc"), 2);
    }

    #[test]
    fn conversions() {
        assert_eq!(stod("1."), Ok(1.0));
        assert_eq!(stod(""), Err(ConvError::Invalid));
        assert_eq!(stod("-"), Err(ConvError::Invalid));
        assert_eq!(stod("1e"), Ok(1.0));
        assert_eq!(stod("-2.5"), Ok(-2.5));
        assert_eq!(stod("1e400"), Err(ConvError::Range));
        assert_eq!(stod("1e-400"), Err(ConvError::Range));
        assert_eq!(stod("0x1p3"), Ok(8.0));
        assert_eq!(stod("0x1.8p1"), Ok(3.0));
        assert_eq!(stod("0x10"), Ok(16.0));
        assert_eq!(stoll("1.5"), Ok(1));
        assert_eq!(stoll("0x10"), Ok(0));
        assert_eq!(stoll(".5"), Err(ConvError::Invalid));
        assert_eq!(stoll("-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(stoll("9223372036854775808"), Err(ConvError::Range));
    }

    #[test]
    fn printing() {
        assert_eq!(ivalue(1.0), "1.");
        assert_eq!(ivalue(-0.0), "0.");
        assert_eq!(ivalue(0.5), "0.5");
        assert_eq!(ivalue(1e-05), "1.0000000000000001e-05");
        assert_eq!(ivalue(0.01), "0.01");
        assert_eq!(ivalue(0.1), "0.10000000000000001");
        assert_eq!(ivalue(123456789.0), "123456789.");
        assert_eq!(ivalue(1e20), "1e+20");
        assert_eq!(ivalue(1.5e300), "1.5000000000000001e+300");
        assert_eq!(ivalue(f64::INFINITY), "inf");
        assert_eq!(ivalue(f64::NEG_INFINITY), "-inf");
        assert_eq!(ivalue(f64::NAN), "nan");
        assert_eq!(ivalue(-2.5), "-2.5");
        assert_eq!(ivalue(1e-4), "0.0001");
        assert_eq!(ivalue(1.5e-5), "1.5e-05");
        assert_eq!(ivalue(-(2f64.powi(63))), "-9223372036854775808.");
        assert_eq!(ivalue(2f64.powi(63)), "9.2233720368547758e+18");
    }
}
