//! The stderr tail against a plain reference model (C09, C10).

use bytes::Bytes;
use childwire_core::stderr_tail::{StderrTail, StderrTailConfig};
use proptest::prelude::*;

/// A line as the docs define it, computed the obvious way: drop one
/// trailing `\r`, then keep the first `max_bytes` bytes.
fn content(raw: &[u8], max_bytes: usize) -> Vec<u8> {
    let line = raw.strip_suffix(b"\r").unwrap_or(raw);
    line[..line.len().min(max_bytes)].to_vec()
}

/// The complete lines of `stream`, and the held partial line (or, after
/// EOF, the last line) if any.
fn reference_lines(stream: &[u8], max_bytes: usize) -> (Vec<Vec<u8>>, Option<Vec<u8>>) {
    let mut segments: Vec<&[u8]> = stream.split(|&b| b == b'\n').collect();
    let last = segments.pop().expect("split yields at least one segment");
    let complete = segments.iter().map(|raw| content(raw, max_bytes)).collect();
    let partial = (!last.is_empty()).then(|| content(last, max_bytes));
    (complete, partial)
}

/// The longest run of last lines within both bounds, joined with `\n`.
fn reference_tail(lines: &[Vec<u8>], config: &StderrTailConfig) -> String {
    let mut kept: Vec<&[u8]> = Vec::new();
    let mut bytes = 0;
    for line in lines.iter().rev() {
        if kept.len() + 1 > config.max_lines || bytes + line.len() > config.max_bytes {
            break;
        }
        bytes += line.len();
        kept.push(line);
    }
    kept.reverse();
    String::from_utf8_lossy(&kept.join(&b'\n')).into_owned()
}

fn all_lines(stream: &[u8], max_bytes: usize) -> Vec<Vec<u8>> {
    let (mut lines, partial) = reference_lines(stream, max_bytes);
    lines.extend(partial);
    lines
}

fn poll_all(tail: &mut StderrTail) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| tail.poll_line())
        .map(|b: Bytes| b.to_vec())
        .collect()
}

/// Splits `data` at the given fractions, giving arbitrary chunk sizes
/// (empty chunks included).
fn chunks<'a>(data: &'a [u8], cuts: &[prop::sample::Index]) -> Vec<&'a [u8]> {
    let mut at: Vec<usize> = cuts.iter().map(|i| i.index(data.len() + 1)).collect();
    at.sort_unstable();
    let mut out = Vec::new();
    let mut from = 0;
    for cut in at {
        out.push(&data[from..cut]);
        from = cut;
    }
    out.push(&data[from..]);
    out
}

/// Bytes rich in line endings, `\r` and invalid UTF-8.
fn stderr_bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        4 => prop::sample::select(b"ab".to_vec()),
        2 => Just(b'\n'),
        2 => Just(b'\r'),
        1 => prop::sample::select(vec![0xff, 0xc3, 0xa9, 0xe2, 0x82, 0xac]),
        1 => any::<u8>(),
    ];
    prop::collection::vec(byte, 0..300)
}

fn small_config() -> impl Strategy<Value = StderrTailConfig> {
    (0..24usize, 0..8usize).prop_map(|(max_bytes, max_lines)| StderrTailConfig {
        max_bytes,
        max_lines,
        // Room for any chunk of these tests, so no line is dropped.
        max_pending_bytes: 4096,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn c09_c10_any_chunking_gives_the_reference_tail_and_lines(
        config in small_config(),
        data in stderr_bytes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let mut tail = StderrTail::new(config.clone());
        let mut seen = 0;
        let mut polled = Vec::new();
        for chunk in chunks(&data, &cuts) {
            tail.handle_data(chunk);
            seen += chunk.len();
            polled.extend(poll_all(&mut tail));

            let (complete, partial) = reference_lines(&data[..seen], config.max_bytes);
            prop_assert_eq!(&polled, &complete, "each complete line once, in order");
            let mut shown = complete;
            shown.extend(partial);
            prop_assert_eq!(tail.tail(), reference_tail(&shown, &config));
            prop_assert_eq!(tail.bytes_seen(), seen as u64);
        }
        tail.handle_eof();
        polled.extend(poll_all(&mut tail));
        let lines = all_lines(&data, config.max_bytes);
        prop_assert_eq!(&polled, &lines, "after EOF the partial line is a line");
        prop_assert_eq!(tail.tail(), reference_tail(&lines, &config));
        prop_assert_eq!(tail.dropped_lines(), 0);
        tail.handle_eof();
        prop_assert_eq!(tail.poll_line(), None, "a second EOF adds nothing");
    }

    #[test]
    fn c09_unpolled_lines_are_bounded_and_the_oldest_dropped(
        max_bytes in 0..16usize,
        extra in 1..64usize,
        data in stderr_bytes(),
        cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..12),
    ) {
        let config = StderrTailConfig { max_bytes, max_lines: 4, max_pending_bytes: max_bytes + extra };
        let mut tail = StderrTail::new(config.clone());
        for chunk in chunks(&data, &cuts) {
            tail.handle_data(chunk);
        }
        tail.handle_eof();
        let lines = all_lines(&data, max_bytes);
        // The newest lines that fit, each costing its length + 1.
        let mut budget = config.max_pending_bytes;
        let kept = lines
            .iter()
            .rev()
            .take_while(|line| match budget.checked_sub(line.len() + 1) {
                Some(left) => { budget = left; true }
                None => false,
            })
            .count();
        let polled = poll_all(&mut tail);
        prop_assert_eq!(&polled[..], &lines[lines.len() - kept..]);
        prop_assert_eq!(tail.dropped_lines(), (lines.len() - kept) as u64);
    }
}

#[test]
fn c09_a_long_line_is_cut_to_its_first_max_bytes() {
    let config = StderrTailConfig {
        max_bytes: 8,
        max_lines: 10,
        ..StderrTailConfig::default()
    };
    let mut tail = StderrTail::new(config);
    tail.handle_data(b"0123456789abcdef");
    assert_eq!(tail.tail(), "01234567", "the held partial line is cut too");
    tail.handle_data(b"ghij\r\nok\r\n");
    assert_eq!(tail.poll_line().as_deref(), Some(&b"01234567"[..]));
    assert_eq!(tail.poll_line().as_deref(), Some(&b"ok"[..]));
    assert_eq!(tail.poll_line(), None);
    assert_eq!(tail.tail(), "ok", "8 bytes hold only the last line whole");
    assert_eq!(tail.cut_lines(), 1);
    assert_eq!(tail.bytes_seen(), 26);
}

#[test]
fn c10_tail_keeps_the_last_lines_with_the_partial_one_and_shows_bad_utf8_lossily() {
    let config = StderrTailConfig {
        max_lines: 3,
        ..StderrTailConfig::default()
    };
    let mut tail = StderrTail::new(config);
    tail.handle_data(b"one\ntwo\r\nthr");
    tail.handle_data(b"ee\n\xff\xfe bad\nError: Cannot find");
    assert_eq!(
        tail.tail(),
        "three\n\u{fffd}\u{fffd} bad\nError: Cannot find"
    );
    tail.handle_data(b" module 'x'");
    tail.handle_eof();
    let lines: Vec<Bytes> = std::iter::from_fn(|| tail.poll_line()).collect();
    assert_eq!(lines.len(), 5);
    assert_eq!(lines[1], "two", "one \\r stripped");
    assert_eq!(lines[4], "Error: Cannot find module 'x'");
}

#[test]
fn c09_only_one_carriage_return_is_stripped_and_blank_lines_are_kept() {
    let mut tail = StderrTail::default();
    tail.handle_data(b"a\r\r\n\n\r\n");
    let lines: Vec<Bytes> = std::iter::from_fn(|| tail.poll_line()).collect();
    assert_eq!(lines, [&b"a\r"[..], b"", b""]);
}

#[test]
fn c09_a_flood_never_grows_past_the_bounds() {
    let config = StderrTailConfig::default();
    let mut tail = StderrTail::new(config.clone());
    let no_newline = vec![b'x'; 64 * 1024];
    let many_lines = b"warning: something\n".repeat(4096);
    for _ in 0..64 {
        tail.handle_data(&no_newline);
    }
    assert_eq!(
        tail.tail().len(),
        config.max_bytes,
        "a 4 MiB line held as its first 64 KiB"
    );
    for _ in 0..64 {
        tail.handle_data(&many_lines);
    }
    let shown = tail.tail();
    assert_eq!(shown.lines().count(), config.max_lines);
    assert!(shown.len() <= config.max_bytes + config.max_lines);
    let mut pending = 0;
    while let Some(line) = tail.poll_line() {
        pending += line.len() + 1;
    }
    assert!(
        pending <= config.max_pending_bytes,
        "{pending} bytes waiting"
    );
    assert!(tail.dropped_lines() > 0);
    assert_eq!(
        tail.bytes_seen(),
        64 * 64 * 1024 + 64 * many_lines.len() as u64
    );
}
