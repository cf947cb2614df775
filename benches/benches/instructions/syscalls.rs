//! System calls per message in the echo scenario, counted, not timed: 200 B
//! lines echoed by `bench-child cat`, a writer and a reader concurrent, in
//! the users' shapes (throughput.rs's). The count is this process's
//! `syscr + syscw` from `/proc/self/io` (every thread's `read`/`write`
//! family calls) before and after, over the messages echoed.
//!
//! Not judged against a baseline: how many lines one `read` returns depends
//! on how far the child got meanwhile, so the count moves with the machine
//! (less than a timing does). A report beside the instruction rows.

use std::io::{BufReader, BufWriter, Write};

use childwire_async::{Config, Received};
use futures_util::{SinkExt, StreamExt};

use super::e2e;
use super::rows::payload;

/// Messages echoed per contender.
pub(crate) const MESSAGES: usize = 20_000;
const LEN: usize = 200;

/// One contender of the echo.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Echo {
    Blocking,
    LinesCodec,
    ChildwireTokio,
}

impl Echo {
    pub(crate) const ALL: [Echo; 3] = [Echo::Blocking, Echo::LinesCodec, Echo::ChildwireTokio];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Echo::Blocking => "blocking std::process (BufWriter thread, read_until)",
            Echo::LinesCodec => "tokio LinesCodec (writer task, FramedRead)",
            Echo::ChildwireTokio => "childwire-tokio (writer task send().await, recv())",
        }
    }

    /// Read/write system calls of this process while it echoed
    /// [`MESSAGES`] messages.
    pub(crate) fn calls(self) -> Result<u64, String> {
        let before = read_write_calls()?;
        match self {
            Echo::Blocking => blocking()?,
            Echo::LinesCodec => e2e::on_tokio(e2e::Placement::BlockOn, lines_codec())?,
            Echo::ChildwireTokio => e2e::on_tokio(e2e::Placement::BlockOn, childwire())?,
        }
        let after = read_write_calls()?;
        Ok(after - before)
    }
}

/// `syscr + syscw` of this process so far.
fn read_write_calls() -> Result<u64, String> {
    let io = std::fs::read_to_string("/proc/self/io").map_err(|e| format!("/proc/self/io: {e}"))?;
    let field = |name: &str| {
        io.lines()
            .find_map(|line| line.strip_prefix(name)?.trim().parse::<u64>().ok())
            .ok_or_else(|| format!("no {name} in /proc/self/io"))
    };
    Ok(field("syscr:")? + field("syscw:")?)
}

fn check(count: usize) -> Result<(), String> {
    if count == MESSAGES {
        Ok(())
    } else {
        Err(format!("echoed {count} of {MESSAGES} lines"))
    }
}

fn blocking() -> Result<(), String> {
    let (mut child, stdin, stdout) = e2e::std_spawn("cat", &[])?;
    let writer = std::thread::spawn(move || -> std::io::Result<()> {
        let mut out = BufWriter::with_capacity(64 * 1024, stdin);
        let line = payload(LEN);
        for _ in 0..MESSAGES {
            out.write_all(line.as_bytes())?;
            out.write_all(b"\n")?;
        }
        out.flush()
    });
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let mut count = 0;
    while count < MESSAGES && e2e::read_line(&mut reader, &mut line)? > 0 {
        count += 1;
    }
    writer
        .join()
        .map_err(|_| "the writer panicked")?
        .map_err(|e| format!("write: {e}"))?;
    child.wait().map_err(|e| format!("wait: {e}"))?;
    check(count)
}

async fn lines_codec() -> Result<(), String> {
    let mut child = e2e::tokio_spawn(e2e::std_command("cat", &[]))?;
    let (mut sink, mut stream) = e2e::lines_codec_pipes(&mut child)?;
    let writer = tokio::spawn(async move {
        let line = payload(LEN);
        for i in 0..MESSAGES {
            sink.feed(line.as_str()).await?;
            if i % 1024 == 1023 {
                SinkExt::<&str>::flush(&mut sink).await?;
            }
        }
        SinkExt::<&str>::close(&mut sink).await
    });
    let mut count = 0;
    while count < MESSAGES {
        match stream.next().await {
            Some(Ok(_)) => count += 1,
            other => return Err(format!("read: {other:?}")),
        }
    }
    writer
        .await
        .map_err(|e| format!("writer: {e}"))?
        .map_err(|e| format!("write: {e}"))?;
    child.wait().await.map_err(|e| format!("wait: {e}"))?;
    check(count)
}

async fn childwire() -> Result<(), String> {
    let transport = e2e::spawn::<childwire_tokio::Tokio>("cat", &[], Config::default())?;
    let (sender, mut receiver) = transport.split();
    let writer = tokio::spawn(async move {
        let line = payload(LEN);
        for _ in 0..MESSAGES {
            sender
                .send(line.as_str())
                .await
                .map_err(|e| e.to_string())?;
        }
        Ok::<_, String>(sender)
    });
    let mut count = 0;
    while count < MESSAGES {
        match receiver.recv().await {
            Some(Received::Message(_)) => count += 1,
            other => return Err(format!("recv: {other:?}")),
        }
    }
    let sender = writer.await.map_err(|e| format!("writer: {e}"))??;
    e2e::clean_exit(sender.shutdown().await)?;
    check(count)
}
