//! `cargo xtask fuzz [TARGET] [--seconds N]`: bounded cargo-fuzz runs.

use crate::cmd;

/// Seconds per target when neither `--seconds` nor the env variable says.
const DEFAULT_SECONDS: u64 = 30;
const SECONDS_ENV: &str = "CHILDWIRE_FUZZ_SECONDS";

/// libFuzzer's `-max_len` per target. The framer's interesting cases are
/// lines around its small (<= 64 byte) limit spread over many chunks, so a few
/// KiB already covers many oversized lines; longer inputs only slow each run.
/// `content_length` gets room for a header block over its 8 KiB bound;
/// `content_length_resync` builds its own, so it needs room only for a few
/// dozen frames' bodies.
/// The JSON-RPC id scanner gets more room: its structured inputs build nested
/// objects and ids up to past its 256-byte cap, which take a few KiB of input.
/// So do `session` and `channel`: each operation costs a few bytes of input,
/// and their limits are small, so 8 KiB is a long run of reads, writes and
/// sends past every bound. `pollution` reads one line: 4 KiB holds
/// structured documents nested far past the check's exact depth.
const MAX_LEN: &[(&str, usize)] = &[
    ("framer", 4096),
    ("encoder", 4096),
    ("lifecycle", 4096),
    ("content_length", 12288),
    ("content_length_resync", 8192),
    ("jsonrpc_id", 8192),
    ("session", 8192),
    ("channel", 8192),
    ("pollution", 4096),
    // A few bytes per operation: 4 KiB is hundreds of starts and exits.
    ("restart", 4096),
    // A few bytes per operation: sends, deaths and restarts by the hundred.
    ("generations", 4096),
    // A shutdown's goodbye: a few bytes per operation.
    ("goodbye", 2048),
    // Six entries of up to 17 processes each fit in 1 KiB; more only repeats them.
    ("ledger", 2048),
    // A few bytes per operation: 4 KiB is hundreds of clock steps and events.
    ("liveness", 4096),
    // One to four bytes per operation: 4 KiB is a thousand joins, requests,
    // answers and ends, far past the model's small bounds.
    ("share", 4096),
];
const DEFAULT_MAX_LEN: usize = 4096;

/// Well above what the targets need, so a real leak trips it, not ordinary use.
const RSS_LIMIT_MB: usize = 4096;

pub(crate) struct Options {
    target: Option<String>,
    seconds: u64,
}

impl Options {
    pub(crate) fn parse(args: &[String]) -> Result<Self, String> {
        let mut target = None;
        let mut seconds = None;
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--seconds" => {
                    let value = args.next().ok_or("--seconds needs a value")?;
                    seconds = Some(cmd::parse_seconds("--seconds", value)?);
                }
                flag if flag.starts_with('-') => {
                    return Err(format!("unknown option `{flag}` for `cargo xtask fuzz`"));
                }
                name if target.is_none() => target = Some(name.to_string()),
                extra => return Err(format!("unexpected argument `{extra}`")),
            }
        }
        let seconds = match seconds {
            Some(seconds) => seconds,
            None => seconds_from_env()?.unwrap_or(DEFAULT_SECONDS),
        };
        Ok(Self { target, seconds })
    }
}

/// The `CHILDWIRE_FUZZ_SECONDS` override, if set.
pub(crate) fn seconds_from_env() -> Result<Option<u64>, String> {
    match std::env::var(SECONDS_ENV) {
        Ok(value) => cmd::parse_seconds(SECONDS_ENV, &value).map(Some),
        Err(_) => Ok(None),
    }
}

pub(crate) fn default_seconds() -> Result<u64, String> {
    Ok(seconds_from_env()?.unwrap_or(DEFAULT_SECONDS))
}

pub(crate) fn run(options: Options) -> Result<(), String> {
    let all = targets()?;
    let selected = match options.target {
        Some(name) if all.contains(&name) => vec![name],
        Some(name) => {
            return Err(format!(
                "no fuzz target `{name}` in fuzz/Cargo.toml (targets: {})",
                all.join(", ")
            ));
        }
        None => all,
    };
    smoke(&selected, options.seconds)
}

/// Runs each target for `seconds`, installing cargo-fuzz first if needed.
pub(crate) fn smoke(targets: &[String], seconds: u64) -> Result<(), String> {
    ensure_cargo_fuzz()?;
    for target in targets {
        eprintln!("--- fuzz target `{target}` for {seconds} s");
        cmd::run(&mut run_command(target, seconds))?;
    }
    Ok(())
}

fn run_command(target: &str, seconds: u64) -> std::process::Command {
    let max_len = MAX_LEN
        .iter()
        .find(|(name, _)| *name == target)
        .map_or(DEFAULT_MAX_LEN, |&(_, len)| len);
    // `--sanitizer none` drops `-Zsanitizer=address`, the one nightly-only
    // flag in cargo-fuzz's default build; the remaining instrumentation
    // (`-Cpasses=sancov-module`, `-Cllvm-args=...`) is stable, so no
    // RUSTC_BOOTSTRAP is needed.
    cmd::cargo([
        "fuzz".to_string(),
        "run".to_string(),
        "--sanitizer".to_string(),
        "none".to_string(),
        target.to_string(),
        "--".to_string(),
        format!("-max_total_time={seconds}"),
        format!("-rss_limit_mb={RSS_LIMIT_MB}"),
        format!("-max_len={max_len}"),
    ])
}

fn ensure_cargo_fuzz() -> Result<(), String> {
    if let Some(version) = cmd::output(&mut cmd::cargo(["fuzz", "--version"])) {
        eprintln!("using {}", version.trim());
        return Ok(());
    }
    eprintln!("cargo-fuzz not found; installing it (takes a few minutes, once)");
    cmd::run(&mut cmd::cargo(["install", "cargo-fuzz", "--locked"]))
}

/// The `[[bin]]` names in fuzz/Cargo.toml, in file order: the manifest is the
/// one list of targets, so a new target needs no change here.
pub(crate) fn targets() -> Result<Vec<String>, String> {
    let path = cmd::repo_root().join("fuzz").join("Cargo.toml");
    let manifest = std::fs::read_to_string(&path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))?;
    let targets = bin_names(&manifest);
    if targets.is_empty() {
        return Err(format!("no [[bin]] targets in {}", path.display()));
    }
    Ok(targets)
}

/// A minimal TOML reading: `name = "..."` lines inside `[[bin]]` tables.
fn bin_names(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_bin = false;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
            continue;
        }
        if !in_bin {
            continue;
        }
        if let Some(("name", value)) = line.split_once('=').map(|(key, value)| (key.trim(), value))
        {
            names.push(value.trim().trim_matches('"').to_string());
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::bin_names;

    #[test]
    fn bin_names_reads_only_bin_tables() {
        let manifest = r#"
[package]
name = "childwire-fuzz"

[[bin]]
name = "framer"   # the decoder
path = "fuzz_targets/framer.rs"

[dependencies.foo]
name = "not-a-bin"

[[bin]]
path = "fuzz_targets/encoder.rs"
name = "encoder"
"#;
        assert_eq!(bin_names(manifest), ["framer", "encoder"]);
    }
}
