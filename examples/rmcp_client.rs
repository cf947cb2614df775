//! An MCP client built on [rmcp], with childwire as its transport.
//!
//! ```text
//! cargo run --example rmcp_client                       # the bundled server
//! cargo run --example rmcp_client -- npx -y @modelcontextprotocol/server-everything
//! cargo run --example rmcp_client -- --call get_current_time \
//!     --args '{"timezone":"UTC"}' uvx mcp-server-time
//! ```
//!
//! `childwire_rmcp::ChildwireTransport` takes the place of rmcp's
//! `TokioChildProcess`; the rest is plain rmcp. Closing the service shuts the
//! server down the MCP way, and the exit report comes out of the transport's
//! exit handle. A server that dies is explained by its report, in the error
//! rmcp returns.
//!
//! [rmcp]: https://docs.rs/rmcp

use std::process::ExitCode;

use childwire::Config;
use childwire_examples::sdk_client::{Plan, sdk_main};
use childwire_rmcp::ChildwireTransport;
use rmcp::ServiceExt;
use rmcp::model::CallToolRequestParams;

fn main() -> ExitCode {
    sdk_main("rmcp_client", "rmcp", run)
}

async fn run(plan: Plan) -> Result<(), String> {
    let program = plan.command.get_program().to_string_lossy().into_owned();
    let transport = ChildwireTransport::spawn(&plan.command, Config::default())
        .map_err(|err| err.to_string())?;
    let exit = transport.exit_handle();
    println!("-> initialize ({program})");
    let client = ().serve(transport).await.map_err(|err| format!("the handshake failed: {err}"))?;
    if let Some(info) = client.peer_info() {
        let server = info
            .server_info
            .as_ref()
            .map(|server| format!("{} {}", server.name, server.version))
            .unwrap_or_else(|| "(unnamed)".into());
        println!(
            "<- initialize: protocol {}; server: {server}",
            info.protocol_version
        );
    }
    let result = session(&client, plan.call).await;
    // Closing the service closes the transport: the graceful shutdown.
    let closed = client.cancel().await;
    match exit.wait().await {
        Some(report) => println!("server {report}"),
        None => println!("server: its end is unknown"),
    }
    result?;
    closed.map_err(|err| format!("the service task failed: {err}"))?;
    Ok(())
}

async fn session(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    call: Option<(String, serde_json::Map<String, serde_json::Value>)>,
) -> Result<(), String> {
    let tools = client
        .list_all_tools()
        .await
        .map_err(|err| format!("tools/list failed: {err}"))?;
    println!("<- {} tools", tools.len());
    for tool in &tools {
        println!(
            "   {}: {}",
            tool.name,
            tool.description.as_deref().unwrap_or("")
        );
    }
    let Some((name, args)) = call else {
        return Ok(());
    };
    println!(
        "-> tools/call {name} {}",
        serde_json::Value::Object(args.clone())
    );
    let result = client
        .call_tool(CallToolRequestParams::new(name).with_arguments(args))
        .await
        .map_err(|err| format!("tools/call failed: {err}"))?;
    for content in &result.content {
        match content.as_text() {
            Some(text) => println!("<- result: {}", text.text),
            None => println!(
                "<- result: {}",
                serde_json::to_string(content).unwrap_or_default()
            ),
        }
    }
    if result.is_error == Some(true) {
        return Err("the tool reported an error".into());
    }
    Ok(())
}
