//! Framing throughput: `LineDecoder` against a bare `memchr` newline scan
//! (the physical limit of the job) and tokio-util's `LinesCodec` (what users
//! would pick instead), timed in the same run on the same chunks.
//!
//! `cargo xtask bench [--quick] [--check]`, or
//! `cargo bench -p childwire-core --bench framing -- [--quick] [--check]`.

#[path = "support/harness.rs"]
mod harness;

use std::hint::black_box;
use std::process::ExitCode;

use bytes::BytesMut;
use childwire_core::decoder::{DEFAULT_MAX_MESSAGE_SIZE, Frame, LineDecoder};
use harness::{Args, Json, Samples, Table, Target, gib_per_s};
use tokio_util::codec::{Decoder, LinesCodec};

const CHUNK: usize = 64 * 1024;
const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// A corpus: NDJSON lines of one length, `\n` included.
struct Corpus {
    name: &'static str,
    line_len: usize,
    /// Smallest acceptable decoder/memchr ratio. Short lines cost a frame
    /// (a `Bytes` split) per 100 bytes, which a bare scan never pays.
    min_vs_memchr: f64,
}

const CORPORA: &[Corpus] = &[
    Corpus {
        name: "100 B lines",
        line_len: 100,
        min_vs_memchr: 0.5,
    },
    Corpus {
        name: "4 KiB lines",
        line_len: 4 * KIB,
        min_vs_memchr: 0.9,
    },
    Corpus {
        name: "1 MiB lines",
        line_len: MIB,
        min_vs_memchr: 0.9,
    },
];

const MIN_VS_LINES_CODEC: f64 = 2.0;

/// One measured corpus.
struct Row {
    corpus: &'static Corpus,
    bytes: usize,
    decoder: Samples,
    memchr: Samples,
    lines_codec: Samples,
    targets: [Target; 2],
}

fn main() -> ExitCode {
    let args = Args::from_env();
    let (total, reps) = if args.quick {
        (4 * MIB, 3)
    } else {
        (64 * MIB, 9)
    };
    eprintln!(
        "framing: {} MiB per corpus in {} KiB chunks, best of {reps} after one warm-up{}",
        total / MIB,
        CHUNK / KIB,
        if args.quick { " (--quick)" } else { "" }
    );

    let mut rows = Vec::new();
    for corpus in CORPORA {
        match measure(corpus, total, reps) {
            Ok(row) => rows.push(row),
            Err(error) => {
                eprintln!("framing: {}: {error}", corpus.name);
                return ExitCode::FAILURE;
            }
        }
    }

    print!("{}", table(&rows).render());
    match harness::write_results("framing", &json(&rows, &args, total, reps)) {
        Ok(path) => eprintln!("results: {}", path.display()),
        Err(error) => eprintln!("framing: could not write results: {error}"),
    }

    let missed = rows
        .iter()
        .flat_map(|row| &row.targets)
        .filter(|t| !t.passed())
        .count();
    if missed > 0 {
        eprintln!("framing: {missed} target(s) missed");
        if args.check {
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}

fn measure(corpus: &'static Corpus, total: usize, reps: usize) -> Result<Row, String> {
    let data = ndjson(corpus.line_len, total);
    let chunks: Vec<&[u8]> = data.chunks(CHUNK).collect();
    let lines = data.len() / corpus.line_len;

    // The three contenders must do the same job, or the ratios mean nothing.
    for (name, count) in [
        ("decoder", decoder(&chunks)),
        ("memchr", memchr_scan(&chunks)),
        ("LinesCodec", lines_codec(&chunks)),
    ] {
        if count != lines {
            return Err(format!("{name} found {count} lines, expected {lines}"));
        }
    }

    let mut row_samples = [Samples::default(), Samples::default(), Samples::default()];
    // Round-robin, so a burst of load from other processes hits all three
    // contenders alike instead of one of them.
    for _ in 0..reps {
        let [dec, scan, codec] = &mut row_samples;
        dec.measure(|| decoder(&chunks));
        scan.measure(|| memchr_scan(&chunks));
        codec.measure(|| lines_codec(&chunks));
    }
    let [decoder, memchr, lines_codec] = row_samples;

    let rate = |s: &Samples| gib_per_s(data.len(), s.best());
    let targets = [
        Target {
            name: "decoder/memchr".into(),
            value: rate(&decoder) / rate(&memchr),
            min: corpus.min_vs_memchr,
        },
        Target {
            name: "decoder/LinesCodec".into(),
            value: rate(&decoder) / rate(&lines_codec),
            min: MIN_VS_LINES_CODEC,
        },
    ];
    Ok(Row {
        corpus,
        bytes: data.len(),
        decoder,
        memchr,
        lines_codec,
        targets,
    })
}

/// `total` bytes (rounded down to whole lines, at least one) of JSON-RPC
/// responses, each exactly `line_len` bytes with its `\n`.
fn ndjson(line_len: usize, total: usize) -> Vec<u8> {
    let lines = (total / line_len).max(1);
    let mut data = Vec::with_capacity(lines * line_len);
    // A fixed xorshift keeps the text varied (no trivially predictable
    // bytes) and the corpus identical from run to run.
    let mut state: u32 = 0x9e37_79b9;
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,.:";
    for id in 0..lines {
        let start = data.len();
        data.extend_from_slice(
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"text":""#).as_bytes(),
        );
        let tail = br#""}}"#;
        while data.len() - start < line_len - tail.len() - 1 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            data.push(ALPHABET[state as usize % ALPHABET.len()]);
        }
        data.extend_from_slice(tail);
        data.push(b'\n');
        debug_assert_eq!(data.len() - start, line_len);
    }
    data
}

fn decoder(chunks: &[&[u8]]) -> usize {
    let mut decoder = LineDecoder::new(DEFAULT_MAX_MESSAGE_SIZE);
    let mut messages = 0;
    for chunk in chunks {
        decoder.handle_data(chunk);
        while let Some(frame) = decoder.poll_frame() {
            if let Frame::Message(message) = black_box(frame) {
                black_box(message.len());
                messages += 1;
            }
        }
    }
    decoder.handle_eof();
    while let Some(frame) = decoder.poll_frame() {
        if let Frame::Message(_) = black_box(frame) {
            messages += 1;
        }
    }
    messages
}

fn memchr_scan(chunks: &[&[u8]]) -> usize {
    chunks
        .iter()
        .map(|chunk| memchr::memchr_iter(b'\n', black_box(chunk)).count())
        .sum()
}

fn lines_codec(chunks: &[&[u8]]) -> usize {
    let mut codec = LinesCodec::new_with_max_length(DEFAULT_MAX_MESSAGE_SIZE);
    let mut buf = BytesMut::with_capacity(CHUNK);
    let mut lines = 0;
    for chunk in chunks {
        buf.extend_from_slice(chunk);
        // The corpus is valid and within limits: an error would be a bench bug.
        while let Some(line) = codec.decode(&mut buf).expect("valid corpus") {
            black_box(line.len());
            lines += 1;
        }
    }
    while let Some(line) = codec.decode_eof(&mut buf).expect("valid corpus") {
        black_box(line);
        lines += 1;
    }
    lines
}

fn table(rows: &[Row]) -> Table {
    let mut table = Table::new([
        "corpus",
        "decoder GiB/s",
        "memchr GiB/s",
        "LinesCodec GiB/s",
        "decoder/memchr",
        "decoder/LinesCodec",
    ]);
    for row in rows {
        let rate = |s: &Samples| format!("{:.2}", gib_per_s(row.bytes, s.best()));
        let ratio = |t: &Target| format!("{:.2}x (>= {:.1}x) {}", t.value, t.min, t.verdict());
        table.row([
            row.corpus.name.to_string(),
            rate(&row.decoder),
            rate(&row.memchr),
            rate(&row.lines_codec),
            ratio(&row.targets[0]),
            ratio(&row.targets[1]),
        ]);
    }
    table
}

fn json(rows: &[Row], args: &Args, total: usize, reps: usize) -> Json {
    let contender = |s: &Samples, bytes: usize| {
        Json::object([
            ("gib_per_s_best", Json::from(gib_per_s(bytes, s.best()))),
            ("gib_per_s_median", Json::from(gib_per_s(bytes, s.median()))),
            (
                "seconds",
                Json::Arr(s.all().iter().map(|&d| Json::from(d)).collect()),
            ),
        ])
    };
    Json::object([
        ("bench", Json::from("framing")),
        ("unix_time", Json::Num(harness::unix_time() as f64)),
        ("quick", Json::Bool(args.quick)),
        ("bytes_per_corpus", Json::from(total)),
        ("chunk_bytes", Json::from(CHUNK)),
        ("repetitions", Json::from(reps)),
        (
            "corpora",
            Json::Arr(
                rows.iter()
                    .map(|row| {
                        Json::object([
                            ("name", Json::from(row.corpus.name)),
                            ("line_bytes", Json::from(row.corpus.line_len)),
                            ("bytes", Json::from(row.bytes)),
                            ("decoder", contender(&row.decoder, row.bytes)),
                            ("memchr", contender(&row.memchr, row.bytes)),
                            ("lines_codec", contender(&row.lines_codec, row.bytes)),
                            (
                                "targets",
                                Json::Arr(row.targets.iter().map(Target::to_json).collect()),
                            ),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}
