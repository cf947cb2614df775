//! Support for the childwire conformance suite.
//!
//! The suite itself lives in `suite/` and is compiled once per runtime adapter (see
//! `tests/tokio.rs`); the child it drives is the `misbehave` binary of this package. This
//! library holds what both need and what does not depend on any runtime:
//!
//! - [`lines`]: the numbered lines the child writes and the suite checks;
//! - [`procfs`]: `/proc` inspection, to prove that no zombie and no orphan is left behind
//!   (Linux; elsewhere every query answers "nothing known", see [`procfs::SUPPORTED`], except
//!   whether a process runs, which Windows answers too);
//! - [`wait_until`]: waiting for an event with a deadline (never a fixed settle-sleep);
//! - [`memory`]: the test process's own resident set, for memory-bound checks;
//! - [`group`]: whether a process group exists, and ending one (Unix).

pub mod group;
pub mod lines;
pub mod memory;
pub mod procfs;
mod wait;
#[cfg(windows)]
mod windows;

pub use group::{KillGroupOnDrop, group_exists, kill_group};
pub use memory::{vm_hwm_kib, vm_rss_kib};
pub use procfs::{
    cgroup_of, group_members, is_zombie, live_group_members, live_processes_with_env, open_fds,
    own_pgid, pid_exists, process_alive, zombie_children_of,
};
pub use wait::{POLL_INTERVAL, wait_until};
