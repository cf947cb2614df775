//! What childwire's end-to-end benches and their child program share: the
//! clock they compare timestamps on, the line that must survive the flood,
//! and `/proc` readings of memory.
//!
//! The benches themselves are in `benches/`, the child in
//! `src/bin/bench_child.rs`. Run them with `cargo xtask bench`.

use std::io;

/// The valid line `bench-child flood` writes after its newline-less flood:
/// the memory bench checks it still arrives.
pub const VALID_LINE: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":"still here"}"#;

/// CLOCK_MONOTONIC in nanoseconds. Unlike [`std::time::Instant`], its value
/// means the same in every process, so the bench can compare a timestamp
/// the child printed with its own.
pub fn monotonic_nanos() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    now.tv_sec as u64 * 1_000_000_000 + now.tv_nsec as u64
}

/// A `kB` field (`VmHWM`, `VmRSS`, ...) of `/proc/<pid>/status`, in KiB;
/// `pid` `None` reads the calling process.
pub fn proc_status_kib(pid: Option<u32>, field: &str) -> io::Result<u64> {
    let path = match pid {
        Some(pid) => format!("/proc/{pid}/status"),
        None => "/proc/self/status".to_string(),
    };
    let status = std::fs::read_to_string(&path)?;
    status
        .lines()
        .find_map(|line| {
            let value = line.strip_prefix(field)?.strip_prefix(':')?;
            value.trim().strip_suffix("kB")?.trim().parse().ok()
        })
        .ok_or_else(|| io::Error::other(format!("no `{field}` in {path}")))
}

/// PIDs of the calling process's children that still exist, zombies
/// included: after a clean shutdown there are none.
pub fn live_children() -> io::Result<Vec<u32>> {
    let me = std::process::id();
    let mut children = Vec::new();
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        // The process may be gone between the listing and the read.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // `pid (comm) state ppid ...`; comm may hold spaces and parentheses.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if ppid == Some(me) {
            children.push(pid);
        }
    }
    Ok(children)
}
