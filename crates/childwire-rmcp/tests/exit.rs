//! A server that exits at once, met through rmcp: whichever way rmcp learns the end (a failed
//! send of its handshake, or the handshake's answer never coming), the error it returns says how
//! the server ended, and the exit handle has the report.

use std::time::Duration;

use childwire::Exit;
use childwire_rmcp::{ChildwireTransport, Command, Config};
use rmcp::ServiceExt;

/// Runs per test: the report used to be lost in a race, so one run proves little.
const RUNS: usize = 100;

/// Bound for one step that takes milliseconds when things work.
const STEP: Duration = Duration::from_secs(20);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c33_a_server_that_exits_at_once_explains_itself_through_rmcp() {
    for run in 0..RUNS {
        let mut command = Command::new("sh");
        command.args(["-c", "echo cannot open database >&2; exit 3"]);
        let transport = ChildwireTransport::spawn(&command, Config::default()).expect("spawn");
        let exit = transport.exit_handle();
        let served = tokio::time::timeout(STEP, ().serve(transport))
            .await
            .expect("the handshake ends");
        let error = match served {
            Ok(_) => panic!("run {run}: the handshake with a dead server succeeded"),
            Err(error) => error.to_string(),
        };
        assert!(error.contains("exited with code 3"), "run {run}: {error}");
        assert!(error.contains("cannot open database"), "run {run}: {error}");
        let report = tokio::time::timeout(STEP, exit.wait())
            .await
            .expect("the exit handle answers")
            .unwrap_or_else(|| panic!("run {run}: the exit handle lost the report"));
        assert_eq!(report.exit, Exit::Code(3), "run {run}: {report}");
        assert!(
            report.stderr_tail.contains("cannot open database"),
            "{report}"
        );
    }
}
