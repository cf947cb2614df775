//! A server that expects a goodbye: LSP's `shutdown` then `exit`, or DAP's `disconnect`.

use std::io::{self, BufRead, BufReader, Write};

/// Which goodbye the server expects.
#[derive(Clone, Copy)]
pub(crate) enum Protocol {
    /// `shutdown` is answered with `null`; `exit` ends the process with 0 after a `shutdown`, 1
    /// without one (as the LSP specification says).
    Lsp,
    /// `disconnect` is answered, then the process ends with 0.
    Dap,
}

/// Echoes every other line; at stdin's EOF, without the goodbye, exits with 3 (so a test can tell
/// a goodbye from a closed stdin).
pub(crate) fn polite(protocol: Protocol) -> io::Result<i32> {
    let mut input = BufReader::new(io::stdin().lock());
    let mut out = io::stdout();
    let mut line = String::new();
    let mut shut_down = false;
    loop {
        line.clear();
        if input.read_line(&mut line)? == 0 {
            return Ok(3);
        }
        let message = line.trim_end();
        match protocol {
            Protocol::Lsp if message.contains(r#""method":"shutdown""#) => {
                shut_down = true;
                let id = field(message, r#""id":"#).unwrap_or("null");
                writeln!(out, r#"{{"jsonrpc":"2.0","id":{id},"result":null}}"#)?;
            }
            Protocol::Lsp if message.contains(r#""method":"exit""#) => {
                return Ok(if shut_down { 0 } else { 1 });
            }
            Protocol::Dap if message.contains(r#""command":"disconnect""#) => {
                let seq = field(message, r#""seq":"#).unwrap_or("0");
                writeln!(
                    out,
                    r#"{{"seq":1,"type":"response","request_seq":{seq},"success":true,"command":"disconnect"}}"#
                )?;
                out.flush()?;
                return Ok(0);
            }
            _ => writeln!(out, "{message}")?,
        }
        out.flush()?;
    }
}

/// The raw value after `key` in `message`, up to the next `,` or `}`.
fn field<'a>(message: &'a str, key: &str) -> Option<&'a str> {
    let rest = &message[message.find(key)? + key.len()..];
    let end = rest.find([',', '}'])?;
    Some(rest[..end].trim())
}
