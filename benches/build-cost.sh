#!/usr/bin/env bash
# What childwire adds to a Tokio user's cold build: three tiny programs that
# spawn `cat`, send it one line and read it back, one on bare
# `tokio::process`, one on `childwire` with its default features (`tokio`
# and `tracing`), and one on `childwire` with `tokio` alone, each
# built cold (`cargo build`, a fresh target directory) under
# `/usr/bin/time`, interleaved round by round so that load on a shared
# machine hits all alike. Prints each build's crates compiled, CPU
# (user+sys) and wall time, then the median CPU of each, its ratio to the
# bare program's, and the median of its ratios to the bare build of the same
# round (steadier when the machine's speed drifts).
#
#   benches/build-cost.sh [ROUNDS]                  (default: 5)
#
# The childwire crates are path dependencies here, which cargo would build
# incrementally (as it builds a workspace's own crates); a user gets them
# from git (as the README says) or the registry, built once without
# incremental state, as every other dependency. So the programs build their dependencies with
# `incremental = false` and their own crate as cargo does by default.
# All use this workspace's `Cargo.lock`, so they resolve the same versions.
#
# Environment: TOOLCHAIN (default: `+1.85.0`, the MSRV as the msrv step of
# `cargo xtask ci` installs it, when rustup has it, else the default
# toolchain); CARGO_FLAGS (e.g. `--offline`); WORK, where
# the programs and results go (default target/build-cost; the cold target
# directories are removed after each build).
set -euo pipefail

rounds=${1:-5}
root=$(git rev-parse --show-toplevel)
work=${WORK:-$root/target/build-cost}
if [ -z "${TOOLCHAIN+x}" ]; then
    # The exact name: rustup takes `+1.85` for a toolchain `1.85` of its own,
    # which it does not have when `1.85.0` is what was installed.
    if rustup toolchain list 2>/dev/null | grep -q '^1\.85\.0-'; then TOOLCHAIN=+1.85.0; else TOOLCHAIN=; fi
fi
command -v /usr/bin/time >/dev/null || { echo "build-cost: needs /usr/bin/time" >&2; exit 1; }
mkdir -p "$work"
results=$work/results.txt
: >"$results"

# The programs: $1 the directory, $2 the dependency lines, $3 main.rs.
program() {
    mkdir -p "$1/src"
    cat >"$1/Cargo.toml" <<EOF
[package]
name = "$(basename "$1")"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
$2

# Dependencies as the registry gives them: built without incremental state.
[profile.dev.package."*"]
incremental = false

[workspace]
EOF
    printf '%s\n' "$3" >"$1/src/main.rs"
    cp "$root/Cargo.lock" "$1/Cargo.lock"
}

program "$work/bare" 'tokio = { version = "1", features = ["rt-multi-thread", "macros", "process", "io-util"] }' '
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut child = Command::new("cat").stdin(Stdio::piped()).stdout(Stdio::piped()).spawn()?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?).lines();
    stdin.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}\n").await?;
    stdin.flush().await?;
    if let Some(line) = stdout.next_line().await? {
        println!("{line}");
    }
    drop(stdin);
    println!("{}", child.wait().await?);
    Ok(())
}'

user_main='
use childwire::tokio::{Command, Config, Transport};
use childwire::Received;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut child = Transport::spawn(&Command::new("cat"), Config::default())?;
    child.send(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).await?;
    if let Some(Received::Message(line)) = child.recv().await {
        println!("{}", String::from_utf8_lossy(&line));
    }
    println!("{}", child.shutdown().await?);
    Ok(())
}'
tokio_dep='tokio = { version = "1", features = ["rt-multi-thread", "macros"] }'
program "$work/user" "childwire = { path = \"$root/crates/childwire\", features = [\"tokio\"] }
$tokio_dep" "$user_main"
program "$work/user-lean" "childwire = { path = \"$root/crates/childwire\", default-features = false, features = [\"tokio\"] }
$tokio_dep" "$user_main"

build() { # name round
    local target out
    target=$(mktemp -d "$work/target.XXXX")
    out=$work/last-$1.txt
    # shellcheck disable=SC2086 # TOOLCHAIN and CARGO_FLAGS are word lists
    (cd "$work/$1" && CARGO_TARGET_DIR=$target /usr/bin/time -f '%U %S %e' -o "$work/time" \
        cargo $TOOLCHAIN build ${CARGO_FLAGS:-} >"$out" 2>&1) ||
        { cat "$out" >&2; rm -rf "$target"; exit 1; }
    rm -rf "$target"
    local crates user sys wall
    crates=$(grep -c ' Compiling ' "$out")
    read -r user sys wall <"$work/time"
    echo "$1 round=$2 crates=$crates cpu=$(echo "$user + $sys" | bc) wall=$wall" | tee -a "$results"
}

for round in $(seq 1 "$rounds"); do
    for name in bare user user-lean; do build "$name" "$round"; done
done

median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2}'; }
cpu_of() { sed -n "s/^$1 .*cpu=\([0-9.]*\).*/\1/p" "$results"; }
bare=$(cpu_of bare | median)
echo "median CPU over $rounds cold builds (toolchain: ${TOOLCHAIN:-default}):"
for name in bare user user-lean; do
    cpu=$(cpu_of "$name" | median)
    paired=$(paste <(cpu_of "$name") <(cpu_of bare) | awk '{print $1 / $2}' | median)
    printf '  %-13s %6.2f s  %.2fx  (per round: %.2fx)\n' "$name" "$cpu" "$(echo "$cpu / $bare" | bc -l)" "$paired"
done
