//! `--restart`: the session on a [`Supervised`] server, restarted when it
//! ends on its own (MCP 2026-07-28, stdio, "Unexpected termination"), each
//! new process re-initialized the way the session was opened before
//! traffic resumes; after the conversation, the server is watched until
//! stdin ends or a signal comes, so a restart can be seen.

use std::future::{Future, poll_fn};
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;

use childwire::{ExitReport, Runtime, Supervised, SupervisedEvent, Supervision, WhileDown};

use super::stop::Stop;
use super::{
    ClientOptions, Discovery, Opened, Outcome, StepFailed, converse, explain_spawn, initialize,
    list_tools, meta, say_shutdown,
};
use crate::mcp_client::findings::Findings;
use crate::mcp_client::session::{Handled, Session, pid_text};

/// The session under supervision; see [`super::session`] for what it
/// returns.
pub(super) async fn session<R: Runtime>(
    options: &ClientOptions,
    discovery: &Discovery<'_>,
    bundled: bool,
    findings: &mut Findings,
) -> Option<(Outcome, ExitReport)> {
    let server = discovery.server;
    // How the session was opened, once it is: what each new process gets.
    let plan: Arc<Mutex<Option<Opened>>> = Arc::default();
    let reinit_plan = Arc::clone(&plan);
    let timeout = options.timeout;
    let mut supervision = Supervision::default();
    // The requests in flight when the server ends are answered with errors
    // that say why, and sent again once it is back.
    supervision.track_requests = true;
    // A send while the server is down fails at once: the session, which
    // restarts it by receiving, then waits for the restart and sends again.
    // Waiting in the send would wait for itself.
    supervision.while_down = WhileDown::Fail;
    let spawned = Supervised::<R>::spawn(
        server.command,
        server.config.clone(),
        supervision,
        move |transport| {
            let plan = *reinit_plan.lock().unwrap_or_else(PoisonError::into_inner);
            Box::pin(async move {
                let Some(plan) = plan else {
                    // The first process: the session opens it itself.
                    return Ok(());
                };
                say!(
                    "spawned the server again (pid {}); re-initializing it before the session goes on",
                    pid_text(transport.id())
                );
                let mut session = Session::new(transport, timeout);
                let failed =
                    |failed: StepFailed| format!("{} failed: {}", failed.step, failed.failure);
                if plan.stateless {
                    say!(
                        "   no handshake: every request carries protocol {} in _meta",
                        plan.protocol
                    );
                    session.set_meta(meta(plan.protocol));
                } else {
                    initialize(&mut session, plan.protocol, &|_| {})
                        .await
                        .map_err(failed)?;
                }
                if plan.tools {
                    list_tools(&mut session).await.map_err(failed)?;
                }
                Ok(())
            })
        },
    );
    let mut supervised = match spawned {
        Ok(supervised) => supervised,
        Err(err) => {
            let explanation = explain_spawn(options.name, &err);
            note!("{explanation}");
            findings.error("spawn", &err.to_string(), &explanation);
            return None;
        }
    };
    // The first process's (empty) initialization runs in the first receive:
    // sends go to it once it is started.
    match supervised.recv().await {
        Some(SupervisedEvent::Started { .. }) => {}
        other => say!("<- {other:?}"),
    }
    server.say_spawned("", supervised.id());
    findings.pid(supervised.id());
    say!("   restarted if it ends on its own (--restart)");

    let mut session = Session::new(supervised, options.timeout);
    let outcome = converse(
        &mut session,
        options,
        discovery,
        bundled,
        &|opened| *plan.lock().unwrap_or_else(PoisonError::into_inner) = Some(opened),
        findings,
    )
    .await;
    let outcome = match outcome {
        Ok(Outcome::Done) => match watch(&mut session, options.name).await {
            Ok(()) => Outcome::Done,
            Err(failed) => Outcome::Failed(failed),
        },
        Ok(outcome) => outcome,
        Err(failed) => Outcome::Failed(failed),
    };
    say_shutdown(&outcome);
    match session.shutdown().await {
        Ok(report) => Some((outcome, report)),
        Err(stopped) => {
            note!("{}: {stopped}", options.name);
            findings.error("shutdown", &stopped.to_string(), &stopped.to_string());
            None
        }
    }
}

/// Watches the server until stdin ends or a signal comes, restarting it
/// as often as the policy allows; fails with the verdict when it gives up.
async fn watch<R: Runtime>(
    session: &mut Session<Supervised<R>>,
    name: &str,
) -> Result<(), StepFailed> {
    let mut stop = Stop::new(name);
    say_watching(session);
    loop {
        let handled = {
            let mut idle = pin!(session.idle());
            poll_fn(|cx| {
                if let Poll::Ready(why) = stop.poll(cx) {
                    return Poll::Ready(Err(why));
                }
                idle.as_mut().poll(cx).map(Ok)
            })
            .await
        };
        match handled {
            Err(why) => {
                say!("   {why}: ending the session");
                return Ok(());
            }
            Ok(Handled::Restarted) => say_watching(session),
            Ok(Handled::Over(failure)) => {
                return Err(StepFailed {
                    step: "watching the server".to_owned(),
                    failure,
                });
            }
            Ok(Handled::Answer(_) | Handled::Unanswered(..) | Handled::Nothing) => {}
        }
    }
}

fn say_watching<R: Runtime>(session: &Session<Supervised<R>>) {
    say!(
        "-> watching the server (pid {}): it is restarted if it ends on its own; \
         end of stdin or Ctrl-C ends the session",
        pid_text(session.link().id())
    );
}
