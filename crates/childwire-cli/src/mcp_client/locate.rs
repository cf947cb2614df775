//! Finding the bundled example server's binary, building it on first use.
//!
//! `cargo run --example mcp_client` builds only `mcp_client`. Its sibling
//! `example_server` lands in the same directory when built, so that is
//! where to look; if it is not there yet, one `cargo build --example
//! example_server` with the same profile puts it there. Running the server
//! through `cargo run` instead would cost a cargo start-up on every run and
//! put cargo, not the server, at the other end of the pipes.

use std::env;
use std::ffi::OsString;
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The bundled server's example name.
pub const SERVER_EXAMPLE: &str = "example_server";

/// The bundled server could not be found or built.
#[derive(Debug)]
pub struct LocateError(String);

impl fmt::Display for LocateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LocateError {}

/// The path of the `example_server` binary next to the running executable,
/// built first if it is missing. `on_build` is called before a build starts,
/// to tell the user why they wait.
pub fn bundled_server(on_build: impl FnOnce()) -> Result<PathBuf, LocateError> {
    let exe = env::current_exe()
        .map_err(|err| LocateError(format!("could not find this program's own path: {err}")))?;
    let dir = exe.parent().unwrap_or(Path::new("."));
    let server = dir.join(format!("{SERVER_EXAMPLE}{}", env::consts::EXE_SUFFIX));
    if server.is_file() {
        return Ok(server);
    }
    on_build();
    build(dir)?;
    if server.is_file() {
        Ok(server)
    } else {
        Err(LocateError(format!(
            "built `{SERVER_EXAMPLE}`, but it is not at {} (a custom target directory or \
             --target?); build it with `cargo build --example {SERVER_EXAMPLE}` and pass its \
             path after `--`",
            server.display()
        )))
    }
}

/// Builds the server example with the profile `dir` belongs to
/// (`target/<profile>/examples`).
fn build(dir: &Path) -> Result<(), LocateError> {
    // Set by `cargo run`; a plain `cargo` from PATH otherwise.
    let cargo = env::var_os("CARGO").unwrap_or_else(|| OsString::from("cargo"));
    let mut command = Command::new(&cargo);
    command
        .args(["build", "--example", SERVER_EXAMPLE, "--manifest-path"])
        // The server is an example of the repository's examples package;
        // this code lives in `crates/childwire-cli`, which that package runs.
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../examples/Cargo.toml"
        ))
        .args(profile_args(dir))
        // Cargo's progress goes to our stderr, where the user sees it;
        // stdout stays ours.
        .stdout(Stdio::null())
        .stderr(Stdio::inherit());
    let cargo = Path::new(&cargo).display();
    match command.status() {
        Ok(status) if status.success() => Ok(()),
        Ok(status) => Err(LocateError(format!(
            "`{cargo} build --example {SERVER_EXAMPLE}` failed ({status}); see its output above"
        ))),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Err(LocateError(format!(
            "the bundled server is not built and `{cargo}` was not found to build it; run \
             `cargo build --example {SERVER_EXAMPLE}` first"
        ))),
        Err(err) => Err(LocateError(format!("could not run `{cargo}`: {err}"))),
    }
}

/// The cargo flags that select the profile whose output directory holds `dir`.
fn profile_args(dir: &Path) -> Vec<String> {
    let profile_dir = if dir.file_name().is_some_and(|name| name == "examples") {
        dir.parent()
    } else {
        Some(dir)
    };
    match profile_dir
        .and_then(Path::file_name)
        .and_then(|name| name.to_str())
    {
        Some("release") => vec!["--release".to_owned()],
        Some("debug") | None => Vec::new(),
        Some(profile) => vec!["--profile".to_owned(), profile.to_owned()],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_build_uses_the_profile_of_the_running_executable() {
        assert!(profile_args(Path::new("/t/debug/examples")).is_empty());
        assert_eq!(
            profile_args(Path::new("/t/release/examples")),
            ["--release"]
        );
        assert_eq!(
            profile_args(Path::new("/t/fast/examples")),
            ["--profile", "fast"]
        );
    }
}
