//! The echo loop every long-running scenario ends in.

use std::io::{self, BufRead, BufReader, BufWriter, Write};
use std::thread;
use std::time::Duration;

/// How each echoed line is written back.
#[derive(Clone, Copy)]
pub(crate) enum Echo {
    /// Every line, as fast as it comes; `\n` or `\r\n` after each.
    Lines { eol: &'static [u8] },
    /// One line per `pause`, flushed each time (a child that reads slowly).
    Slow { pause: Duration },
}

/// Echoes stdin lines to stdout until stdin reaches EOF.
///
/// Output is flushed whenever no more input is buffered: one message in flight gets its answer at
/// once, many in flight are answered in batches. A final line without `\n` is echoed with one.
/// Each line is handed to the writer whole, so lines another thread writes to stdout (see
/// `stderr-flood`) never land inside an echoed one.
pub(crate) fn echo(mode: Echo) -> io::Result<()> {
    // Larger than stdin's own buffer, so reads bypass that one and `buffer()` below tells the truth.
    let mut input = BufReader::with_capacity(64 * 1024, io::stdin().lock());
    let mut out = BufWriter::with_capacity(64 * 1024, io::stdout());
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return out.flush();
        }
        if line.last() == Some(&b'\n') {
            line.pop();
        }
        match mode {
            Echo::Lines { eol } => {
                line.extend_from_slice(eol);
                out.write_all(&line)?;
                if input.buffer().is_empty() {
                    out.flush()?;
                }
            }
            Echo::Slow { pause } => {
                line.push(b'\n');
                out.write_all(&line)?;
                out.flush()?;
                thread::sleep(pause);
            }
        }
    }
}

/// Answers every JSON-RPC request line (`"id"` and `"method"`) with a result
/// naming its id, `pause` after reading it; other lines get no answer. A
/// server that takes its time, for requests in flight when it dies.
pub(crate) fn answer(pause: Duration) -> io::Result<()> {
    let mut input = BufReader::new(io::stdin().lock());
    let mut out = io::stdout();
    let mut line = Vec::new();
    loop {
        line.clear();
        if input.read_until(b'\n', &mut line)? == 0 {
            return Ok(());
        }
        let Some(id) = request_id(&line) else {
            continue;
        };
        if !pause.is_zero() {
            thread::sleep(pause);
        }
        let mut answer = b"{\"jsonrpc\":\"2.0\",\"id\":".to_vec();
        answer.extend_from_slice(id);
        answer.extend_from_slice(b",\"result\":{}}\n");
        out.write_all(&answer)?;
        out.flush()?;
    }
}

/// The raw `id` of a request line written as the tests write them
/// (`"id":` then a number or a string without escapes), if it has a method.
fn request_id(line: &[u8]) -> Option<&[u8]> {
    let text = std::str::from_utf8(line).ok()?;
    if !text.contains("\"method\"") {
        return None;
    }
    let start = text.find("\"id\":")? + 5;
    let rest = &text[start..];
    let end = match rest.strip_prefix('"') {
        Some(string) => string.find('"')? + 2,
        None => rest.find([',', '}'])?,
    };
    Some(&rest.as_bytes()[..end])
}
