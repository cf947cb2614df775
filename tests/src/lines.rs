//! The numbered lines `misbehave` writes and the suite checks.
//!
//! A numbered line is `{"n":N,"pad":"xxx…"}`, padded so that the whole line (without its
//! newline) is exactly the requested length when that is at least the unpadded length. The
//! number lets a test prove that nothing was lost, duplicated or reordered; the padding lets it
//! choose the size of every message (e.g. exactly `max_message_size`, or one byte more).

/// Builds numbered line `n`, `len` bytes long (longer if `len` is too small to hold the number),
/// without the trailing newline.
pub fn numbered_line(n: u64, len: usize) -> Vec<u8> {
    let head = format!("{{\"n\":{n},\"pad\":\"");
    const TAIL: &[u8] = b"\"}";
    let pad = len.saturating_sub(head.len() + TAIL.len());
    let mut line = Vec::with_capacity(head.len() + pad + TAIL.len());
    line.extend_from_slice(head.as_bytes());
    line.resize(head.len() + pad, b'x');
    line.extend_from_slice(TAIL);
    line
}

/// Reads the number back from a line built by [`numbered_line`] (or any line that starts with
/// `{"n":N`, such as `{"n":N}`); `None` for anything else.
pub fn parse_numbered(line: &[u8]) -> Option<u64> {
    let rest = line.strip_prefix(b"{\"n\":")?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits == 0 || !matches!(rest.get(digits), Some(b',' | b'}')) {
        return None;
    }
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_the_requested_length_and_round_trip() {
        for len in [0, 1, 17, 18, 100, 1000, 65_536] {
            for n in [0, 7, 12_345, u64::MAX] {
                let line = numbered_line(n, len);
                let minimal = numbered_line(n, 0).len();
                assert_eq!(line.len(), len.max(minimal), "n={n} len={len}");
                assert!(!line.contains(&b'\n') && !line.contains(&b'\r'));
                assert_eq!(parse_numbered(&line), Some(n));
            }
        }
        assert_eq!(numbered_line(3, 0), b"{\"n\":3,\"pad\":\"\"}");
    }

    #[test]
    fn parse_rejects_other_lines() {
        assert_eq!(parse_numbered(b"{\"n\":4}"), Some(4));
        for bad in [
            &b""[..],
            b"{\"n\":}",
            b"{\"n\":1x}",
            b"{\"m\":1}",
            b"{\"n\":99999999999999999999}",
        ] {
            assert_eq!(
                parse_numbered(bad),
                None,
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
