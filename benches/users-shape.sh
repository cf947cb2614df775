#!/usr/bin/env bash
# The users' shape (benches/benches/users_shape.rs) at this checkout and at an
# older revision, the same bench source built against each, the two builds
# run interleaved round by round so that load on a shared machine hits both
# alike; then each build's median and range of childwire's throughput over
# tokio-util LinesCodec's, per line size and placement of the reader.
#
#   benches/users-shape.sh [OLD_REV] [ROUNDS]      (default: 6a80c2d 7)
#
# Environment: OLD_DIR, the worktree of OLD_REV (default
# target/users-shape/OLD_REV, made with `git worktree add` when missing; it
# gets its own target directory inside it); MESSAGES (default 100000); SIZES
# (default "64 200"); REPS, repetitions per run of a build (default 1: each
# round is one repetition of each build); KEEP_OLD_TARGET=1 keeps the old build's target directory,
# which is otherwise removed at the end (it takes a few GB).
# Needs nothing but git and cargo. The raw lines go to
# target/users-shape/results.txt.
set -euo pipefail

old_rev=${1:-6a80c2d}
rounds=${2:-7}
messages=${MESSAGES:-100000}
reps=${REPS:-1}
sizes=${SIZES:-64 200}
root=$(git rev-parse --show-toplevel)
old_dir=${OLD_DIR:-$root/target/users-shape/$old_rev}
results=$root/target/users-shape/results.txt
mkdir -p "$(dirname "$results")"

if [ ! -d "$old_dir" ]; then
    git -C "$root" worktree add --detach "$old_dir" "$old_rev"
fi
# The same bench source at both revisions.
cp "$root/benches/benches/users_shape.rs" "$old_dir/benches/benches/users_shape.rs"
if ! grep -q 'name = "users_shape"' "$old_dir/benches/Cargo.toml"; then
    printf '\n[[bench]]\nname = "users_shape"\nharness = false\n' >>"$old_dir/benches/Cargo.toml"
fi

# Builds the bench in $1 with target directory $2; prints the executable.
build() {
    local exe
    exe=$(cd "$1" && CARGO_TARGET_DIR=$2 nice -n 10 cargo bench -p childwire-bench \
        --bench users_shape --no-run 2>&1 | tee /dev/stderr |
        sed -n 's/^ *Executable .*(\(.*\))$/\1/p' | tail -n 1)
    [ -n "$exe" ] || { echo "users-shape: no executable built in $1" >&2; exit 1; }
    case $exe in /*) echo "$exe" ;; *) echo "$1/$exe" ;; esac
}
new_exe=$(build "$root" "${CARGO_TARGET_DIR:-$root/target}")
old_exe=$(build "$old_dir" "$old_dir/target")
new_rev=$(git -C "$root" rev-parse --short HEAD)
if ! git -C "$root" diff --quiet HEAD; then new_rev="$new_rev+changes"; fi

: >"$results"
run() { # label exe size
    nice -n 10 "$2" --size "$3" --messages "$messages" --reps "$reps" |
        sed -n "s/^users-shape /build=$1 /p" >>"$results"
}
for round in $(seq 1 "$rounds"); do
    for size in $sizes; do
        # Which build goes first alternates from round to round.
        if [ $((round % 2)) -eq 1 ]; then
            run "$new_rev" "$new_exe" "$size"
            run "$old_rev" "$old_exe" "$size"
        else
            run "$old_rev" "$old_exe" "$size"
            run "$new_rev" "$new_exe" "$size"
        fi
    done
    echo "users-shape: round $round of $rounds done" >&2
done

# `field NAME` of a result line.
field() { sed -n "s/.* $1=\([^ ]*\).*/\1/p"; }
printf '\n%s lines per transfer, %s rounds of %s repetition(s) of each build, builds interleaved;\n' \
    "$messages" "$rounds" "$reps"
printf 'childwire over LinesCodec (each repetition: the two one after the other), median (min-max)\n'
printf '%-22s %-6s %-9s %-24s %-18s %s\n' build size placement ratio "childwire MiB/s" "LinesCodec MiB/s"
for build in "$new_rev" "$old_rev"; do
    for size in $sizes; do
        for placement in task block_on; do
            lines=$(grep "^build=$build size=$size placement=$placement " "$results" || true)
            [ -n "$lines" ] || continue
            summary() { # values on stdin: median (min-max)
                sort -g | awk '{ v[NR] = $1 } END {
                    m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
                    printf "%.2f (%.2f-%.2f)", m, v[1], v[NR] }'
            }
            printf '%-22s %-6s %-9s %-24s %-18s %s\n' "$build" "$size" "$placement" \
                "$(field ratio <<<"$lines" | summary)x" \
                "$(field childwire <<<"$lines" | summary)" \
                "$(field lines_codec <<<"$lines" | summary)"
        done
    done
done

if [ "${KEEP_OLD_TARGET:-0}" != 1 ]; then
    rm -rf "$old_dir/target"
    echo "users-shape: removed $old_dir/target (KEEP_OLD_TARGET=1 keeps it)" >&2
fi
