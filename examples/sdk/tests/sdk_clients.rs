//! `rmcp_client` and `turbomcp_client` end to end: the same session through
//! each MCP SDK with childwire as its transport, against the bundled server
//! and a server that dies during the handshake.

// Unix only: its failing server is a POSIX shell script.
#![cfg(unix)]

// The examples package's helpers: they build and run this package's examples.
#[path = "../../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use support::{Output, example, run};

const DEADLINE: Duration = Duration::from_secs(30);
const CLIENTS: [&str; 2] = ["rmcp_client", "turbomcp_client"];

fn client(name: &str, args: &[&str]) -> Output {
    run(&example(name), args, Vec::new(), DEADLINE)
}

#[test]
fn c30_each_sdk_lists_and_calls_the_bundled_servers_tools_and_shuts_it_down() {
    for name in CLIENTS {
        let out = client(name, &[]);
        let stdout = out.stdout_text();
        assert!(out.status.success(), "{name}: {out:?}");
        for expected in [
            "server: childwire-example-server",
            "<- 2 tools",
            "echo: ",
            "add: ",
            "-> tools/call add {\"a\":2,\"b\":40}",
            "<- result: 42",
            "server exited with code 0 after stdin was closed",
        ] {
            assert!(
                stdout.contains(expected),
                "{name}: missing {expected:?} in:\n{out:?}"
            );
        }
    }
}

#[test]
fn c30_each_sdk_calls_the_tool_it_is_asked_to() {
    for name in CLIENTS {
        let out = client(
            name,
            &["--call", "echo", "--args", r#"{"text":"hi there"}"#],
        );
        assert!(out.status.success(), "{name}: {out:?}");
        assert!(
            out.stdout_text().contains("<- result: hi there"),
            "{name}: {out:?}"
        );
    }
}

#[test]
fn c10_c30_a_server_dying_in_the_handshake_is_explained_by_its_exit_report() {
    let server = "read line; echo 'cannot open database' >&2; exit 3";
    for name in CLIENTS {
        let out = client(name, &["--", "sh", "-c", server]);
        assert_eq!(out.status.code(), Some(1), "{name}: {out:?}");
        assert!(
            out.stderr.contains("the handshake failed")
                && out.stderr.contains("exited with code 3")
                && out.stderr.contains("cannot open database"),
            "{name}: {out:?}"
        );
    }
}

#[test]
fn a_usage_error_exits_with_2() {
    for name in CLIENTS {
        let out = client(name, &["--nonsense"]);
        assert_eq!(out.status.code(), Some(2), "{name}: {out:?}");
        assert!(
            out.stderr.contains("unknown option `--nonsense`"),
            "{name}: {out:?}"
        );
    }
}
