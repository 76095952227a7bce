//! Lower-case hex without `0x`, as `packet-json.md` writes byte strings.

/// Two hex digits for every byte value.
const DIGITS: [[u8; 2]; 256] = {
    let hex = b"0123456789abcdef";
    let mut t = [[0u8; 2]; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = [hex[i >> 4], hex[i & 15]];
        i += 1;
    }
    t
};

/// Appends the hex of `bytes` to `out`.
pub fn push(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    out.resize(start + 2 * bytes.len(), 0);
    for (d, &b) in out[start..].chunks_exact_mut(2).zip(bytes) {
        d.copy_from_slice(&DIGITS[usize::from(b)]);
    }
}

/// The hex of `bytes`.
pub fn string(bytes: &[u8]) -> String {
    let mut out = Vec::with_capacity(2 * bytes.len());
    push(&mut out, bytes);
    String::from_utf8(out).expect("hex digits are ASCII")
}

/// Bytes from hex digits (an optional `0x` in front).
pub fn parse(s: &str) -> Result<Vec<u8>, String> {
    let s = s.strip_prefix("0x").unwrap_or(s);
    if s.len() % 2 != 0 {
        return Err("odd number of hex digits".into());
    }
    s.as_bytes()
        .chunks_exact(2)
        .map(|p| {
            let digit = |c: u8| (c as char).to_digit(16);
            match (digit(p[0]), digit(p[1])) {
                (Some(h), Some(l)) => Ok((h * 16 + l) as u8),
                _ => Err(format!("bad hex digits {:?}", String::from_utf8_lossy(p))),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip() {
        let all: Vec<u8> = (0..=255).collect();
        let s = super::string(&all);
        assert!(s.starts_with("000102") && s.ends_with("fdfeff"));
        assert_eq!(super::parse(&s).unwrap(), all);
        assert_eq!(super::parse("0xA0b1").unwrap(), [0xa0, 0xb1]);
        assert!(super::parse("abc").is_err());
        assert!(super::parse("zz").is_err());
        assert!(super::parse("+1").is_err());
    }
}
