//! C35, differentially: a stream of good `Content-Length` frames with one
//! lie told among them (a wrong length, a cut, garbage, a broken or
//! over-long header block, header lines ended by `\n` alone), at a
//! fuzzer-chosen point, fed in fuzzer-chosen chunks. The decoder must give
//! exactly what the plain reference model gives, and every good frame from
//! the one after the first good header past the lie must arrive, in order
//! (`childwire_core::testing::content_length::lies`).

#![no_main]

use arbitrary::Arbitrary;
use childwire_core::ContentLengthDecoder;
use childwire_core::Frame;
use childwire_core::testing::content_length::{
    self as reference,
    lies::{self, Kind, Lie},
};
use libfuzzer_sys::fuzz_target;

/// A limit no body here reaches: this target is about framing, not size.
const MAX: usize = 1 << 20;

#[derive(Debug, Arbitrary)]
struct Input {
    /// The good frames' bodies (line breaks are replaced, as JSON has none).
    bodies: Vec<Vec<u8>>,
    /// Which good frame the lie comes before (modulo their number + 1).
    at: u8,
    lie: LieKind,
    /// The lie's body, or its garbage.
    lie_body: Vec<u8>,
    /// How far a wrong length is off, or where a cut falls.
    by: u16,
    /// Chunk sizes, cycled; an empty list feeds everything at once.
    chunks: Vec<u8>,
    /// Bit `i % 8` says whether chunk `i` is given as `Bytes` (no copy).
    by_bytes: u8,
}

#[derive(Debug, Clone, Copy, Arbitrary)]
enum LieKind {
    Short,
    Long,
    Cut,
    Garbage,
    LfOnly,
    OverLong,
    MissingLength,
    BadLength,
}

impl From<LieKind> for Kind {
    fn from(kind: LieKind) -> Kind {
        match kind {
            LieKind::Short => Kind::Short,
            LieKind::Long => Kind::Long,
            LieKind::Cut => Kind::Cut,
            LieKind::Garbage => Kind::Garbage,
            LieKind::LfOnly => Kind::LfOnly,
            LieKind::OverLong => Kind::OverLong,
            LieKind::MissingLength => Kind::MissingLength,
            LieKind::BadLength => Kind::BadLength,
        }
    }
}

fuzz_target!(|input: Input| {
    let bodies: Vec<Vec<u8>> = input.bodies.into_iter().take(40).collect();
    let at = usize::from(input.at) % (bodies.len() + 1);
    let lie = Lie {
        kind: input.lie.into(),
        body: input.lie_body,
        by: usize::from(input.by),
    };
    let told = lies::tell(&bodies, at, &lie);

    let mut decoder = ContentLengthDecoder::new(MAX);
    let mut frames: Vec<Frame> = Vec::new();
    let mut rest = &told.wire[..];
    let mut sizes = input.chunks.iter().map(|&n| usize::from(n).max(1)).cycle();
    let mut step = 0u32;
    while !rest.is_empty() {
        let size = sizes.next().unwrap_or(rest.len()).min(rest.len());
        let (chunk, tail) = rest.split_at(size);
        rest = tail;
        let by_bytes = input.by_bytes & (1 << (step % 8)) != 0;
        step += 1;
        reference::feed(&mut decoder, chunk, by_bytes, &mut frames);
    }
    reference::finish(&mut decoder, &mut frames);

    assert_eq!(frames, reference::frames(&told.wire, MAX).0);
    if let Err(why) = lies::check(&told, &frames) {
        panic!(
            "{why}\nlie {lie:?} before frame {at} of {}",
            told.bodies.len()
        );
    }
});
