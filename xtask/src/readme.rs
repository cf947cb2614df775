//! `cargo xtask readme`, the `readme` step of `cargo xtask ci`: the root
//! README's code compiles exactly as a user would copy it.
//!
//! A doctest would compile the snippets with the dependencies of the crate
//! that includes them, so a README that forgets the runtime in its
//! `[dependencies]` would still pass. Here every ```` ```rust ```` block is
//! built in a scratch crate under `<target>/readme-check/` whose manifest is
//! the README's own ```` ```toml ```` block that starts with
//! `[dependencies]` (the nearest one above the snippet), with the git
//! dependency on this repository replaced by a path to this checkout. The
//! workspace's `Cargo.lock` is copied in, so the versions are the ones CI
//! tests (and no index is needed when they are already downloaded).
//!
//! A ```` ```rust,ignore ```` block is a fragment and is skipped; every
//! other Rust block must be a whole program. A ```` ```toml ```` block
//! without the `[dependencies]` header (a line to add) is not built, but each
//! git dependency in it must name a crate of this repository.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::cmd;

/// Where the scratch crates and their target directory go, below the target
/// directory.
const SCRATCH_DIR: &str = "readme-check";

pub(crate) fn check() -> Result<(), String> {
    let root = cmd::repo_root();
    let readme = read(&root.join("README.md"))?;
    let repository = workspace_repository(&read(&root.join("Cargo.toml"))?)
        .ok_or("no `repository` in [workspace.package] of Cargo.toml")?;
    let crates = scratch_crates(&readme, &repository, &root)?;
    let scratch = target_dir(&root).join(SCRATCH_DIR);
    let lock = root.join("Cargo.lock");
    for (index, krate) in crates.iter().enumerate() {
        let dir = scratch.join(format!("snippets-{}", index + 1));
        krate.write(&dir, &lock)?;
        eprintln!(
            "README: {} snippet(s) with the dependencies at line {}",
            krate.snippets.len(),
            krate.manifest_line
        );
        let mut build = cmd::cargo(["build", "--examples", "--manifest-path"]);
        build.arg(dir.join("Cargo.toml"));
        // Its own target directory: the scratch crates are outside the
        // workspace, so their builds of our crates must not replace the
        // workspace's.
        build.env("CARGO_TARGET_DIR", scratch.join("target"));
        // A snippet a user copies compiles without a warning too (an unused
        // import in the README is a mistake in it). Dependencies' lints are
        // capped by cargo as always.
        build.env("RUSTFLAGS", "-D warnings");
        cmd::run(&mut build).map_err(|error| {
            format!(
                "a README snippet does not compile with the README's dependencies (line {}): \
                 {error}; cargo names the snippet as examples/readme_line_N.rs, N being the \
                 README line of its ```rust fence",
                krate.manifest_line
            )
        })?;
    }
    Ok(())
}

/// One scratch crate: a `[dependencies]` block of the README and the Rust
/// snippets below it.
#[derive(Debug, PartialEq)]
struct ScratchCrate {
    /// The README line of the block's opening fence.
    manifest_line: usize,
    /// The block, the git dependencies made paths.
    dependencies: String,
    /// Each snippet's fence line and text.
    snippets: Vec<(usize, String)>,
}

impl ScratchCrate {
    /// Writes the crate to `dir` (cleared first), with `lock` as its
    /// `Cargo.lock`.
    fn write(&self, dir: &Path, lock: &Path) -> Result<(), String> {
        if dir.exists() {
            std::fs::remove_dir_all(dir)
                .map_err(|error| format!("cannot clear {}: {error}", dir.display()))?;
        }
        let manifest = format!(
            "[package]\nname = \"readme-snippets\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\
             publish = false\n\n# Not a member of the repository's workspace.\n[workspace]\n\n{}",
            self.dependencies
        );
        write(&dir.join("Cargo.toml"), &manifest)?;
        write(
            &dir.join("src/lib.rs"),
            "//! The README's snippets are the examples.\n",
        )?;
        for (line, snippet) in &self.snippets {
            write(
                &dir.join(format!("examples/readme_line_{line}.rs")),
                snippet,
            )?;
        }
        std::fs::copy(lock, dir.join("Cargo.lock"))
            .map_err(|error| format!("cannot copy {}: {error}", lock.display()))?;
        Ok(())
    }
}

/// A fenced code block: its info string (`rust,no_run`), the line of its
/// opening fence, and its text.
#[derive(Debug, PartialEq)]
struct Block {
    info: String,
    line: usize,
    text: String,
}

/// The fenced code blocks of `markdown` (fences of three backticks at the
/// start of a line, as the README writes them).
fn blocks(markdown: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut open: Option<Block> = None;
    for (index, line) in markdown.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    line: index + 1,
                    text: String::new(),
                });
            }
            (Some(_), Some(rest)) if rest.trim().is_empty() => {
                blocks.extend(open.take());
            }
            (Some(block), _) => {
                block.text.push_str(line);
                block.text.push('\n');
            }
            (None, None) => {}
        }
    }
    blocks
}

/// The scratch crates the README's blocks make: one per `[dependencies]`
/// block that has Rust snippets below it.
fn scratch_crates(
    readme: &str,
    repository: &str,
    root: &Path,
) -> Result<Vec<ScratchCrate>, String> {
    let mut crates: Vec<ScratchCrate> = Vec::new();
    for block in blocks(readme) {
        let mut info = block.info.split(',').map(str::trim);
        match info.next() {
            Some("toml") => {
                let dependencies = local_dependencies(&block, repository, root)?;
                if block.text.trim_start().starts_with("[dependencies]") {
                    crates.push(ScratchCrate {
                        manifest_line: block.line,
                        dependencies,
                        snippets: Vec::new(),
                    });
                }
            }
            Some("rust") if info.any(|flag| flag == "ignore") => {}
            Some("rust") => {
                let Some(krate) = crates.last_mut() else {
                    return Err(format!(
                        "README.md line {}: a Rust snippet before any ```toml block starting with \
                         [dependencies]: say what it needs above it",
                        block.line
                    ));
                };
                krate.snippets.push((block.line, block.text));
            }
            _ => {}
        }
    }
    crates.retain(|krate| !krate.snippets.is_empty());
    if crates.is_empty() {
        return Err("README.md has no Rust snippet to compile (all `ignore`?)".into());
    }
    Ok(crates)
}

/// `block`'s text with each git dependency on `repository` made a path
/// dependency on the crate of that name in this checkout; an error for one
/// that names no such crate.
fn local_dependencies(block: &Block, repository: &str, root: &Path) -> Result<String, String> {
    let git = format!("git = \"{repository}\"");
    let mut text = String::new();
    for (offset, line) in block.text.lines().enumerate() {
        if !line.contains(&git) {
            let _ = writeln!(text, "{line}");
            continue;
        }
        let key = line.split('=').next().unwrap_or("").trim();
        let name = quoted_value(line, "package").unwrap_or(key);
        let path = root.join("crates").join(name);
        if !path.join("Cargo.toml").is_file() {
            return Err(format!(
                "README.md line {}: `{name}` is not a crate of this repository (no crates/{name})",
                block.line + 1 + offset
            ));
        }
        // Forward slashes: a TOML string, also on Windows.
        let path = path.display().to_string().replace('\\', "/");
        let _ = writeln!(
            text,
            "{}",
            line.replace(&git, &format!("path = \"{path}\""))
        );
    }
    Ok(text)
}

/// The value of `key = "value"` inside `line`, if any.
fn quoted_value<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let after = line.split(&format!("{key} = \"")).nth(1)?;
    after.split('"').next()
}

/// `repository = "..."` from `[workspace.package]`: the URL the README's git
/// dependencies name.
fn workspace_repository(manifest: &str) -> Option<String> {
    let mut in_table = false;
    for line in manifest.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.starts_with('[') {
            in_table = line == "[workspace.package]";
            continue;
        }
        if let (true, Some(("repository", value))) = (
            in_table,
            line.split_once('=').map(|(key, value)| (key.trim(), value)),
        ) {
            return Some(value.trim().trim_matches('"').to_owned());
        }
    }
    None
}

/// `$CARGO_TARGET_DIR`, or the workspace's `target/`.
fn target_dir(root: &Path) -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from)
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path)
        .map_err(|error| format!("cannot read {}: {error}", path.display()))
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|error| format!("cannot create {}: {error}", parent.display()))?;
    }
    std::fs::write(path, text).map_err(|error| format!("cannot write {}: {error}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPO: &str = "https://github.com/childwire/childwire";

    fn crates(readme: &str) -> Result<Vec<ScratchCrate>, String> {
        scratch_crates(readme, REPO, &cmd::repo_root())
    }

    #[test]
    fn each_snippet_gets_the_dependencies_above_it_and_fragments_are_skipped() {
        let readme = "\
# x

```toml
[dependencies]
childwire = { git = \"https://github.com/childwire/childwire\" }
tokio = \"1\"
```

```rust,no_run
fn main() {}
```

```rust,ignore
let fragment = 1;
```

```sh
cargo run
```

```toml
[dependencies]
childwire = { git = \"https://github.com/childwire/childwire\", default-features = false }
```

```rust
fn main() { println!(); }
```
";
        let crates = crates(readme).unwrap();
        assert_eq!(crates.len(), 2);
        assert_eq!(crates[0].manifest_line, 3);
        assert_eq!(crates[0].snippets, [(9, "fn main() {}\n".to_owned())]);
        let path = cmd::repo_root().join("crates/childwire");
        assert!(
            crates[0].dependencies.starts_with(&format!(
                "[dependencies]\nchildwire = {{ path = \"{}\" }}\ntokio = \"1\"\n",
                path.display()
            )),
            "{}",
            crates[0].dependencies
        );
        assert_eq!(crates[1].snippets.len(), 1);
        assert!(crates[1].dependencies.contains("default-features = false"));
    }

    #[test]
    fn a_snippet_without_dependencies_above_it_is_refused() {
        let error = crates("```rust\nfn main() {}\n```\n").unwrap_err();
        assert!(error.contains("line 1"), "{error}");
    }

    #[test]
    fn a_git_dependency_on_no_crate_of_the_repository_is_refused() {
        let readme =
            "```toml\nchildwire-nope = { git = \"https://github.com/childwire/childwire\" }\n```\n";
        let error = crates(readme).unwrap_err();
        assert!(
            error.contains("line 2") && error.contains("childwire-nope"),
            "{error}"
        );
    }

    #[test]
    fn a_readme_with_nothing_to_compile_is_refused() {
        let readme = "```toml\n[dependencies]\nserde = \"1\"\n```\n```rust,ignore\nx\n```\n";
        assert!(crates(readme).is_err());
    }

    #[test]
    fn the_root_readme_checks_its_main_example() {
        let readme = read(&cmd::repo_root().join("README.md")).unwrap();
        let crates = crates(&readme).unwrap();
        let first = &crates[0];
        assert!(
            first.dependencies.contains("tokio"),
            "{}",
            first.dependencies
        );
        assert!(first.snippets[0].1.contains("Transport::spawn"));
    }

    #[test]
    fn the_repository_url_is_read_from_workspace_package() {
        let manifest =
            "[package]\nrepository = \"a\"\n[workspace.package]\nrepository = \"b\" # c\n";
        assert_eq!(workspace_repository(manifest).as_deref(), Some("b"));
    }
}
