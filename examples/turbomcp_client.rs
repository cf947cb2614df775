//! An MCP client built on [TurboMCP], with childwire as its transport.
//!
//! ```text
//! cargo run --example turbomcp_client                   # the bundled server
//! cargo run --example turbomcp_client -- npx -y @modelcontextprotocol/server-everything
//! ```
//!
//! `childwire_turbomcp::ChildwireTransport` takes the place of TurboMCP's
//! `ChildProcessTransport` (built from the same `ChildProcessConfig`); the
//! rest is plain `turbomcp_client`. `Client::shutdown` disconnects the
//! transport, which shuts the server down the MCP way; the exit report comes
//! out of the transport's exit handle.
//!
//! [TurboMCP]: https://docs.rs/turbomcp

use std::collections::HashMap;
use std::process::ExitCode;

use childwire::Config;
use childwire_examples::sdk_client::{Plan, sdk_main};
use childwire_turbomcp::ChildwireTransport;
use turbomcp_client::Client;

fn main() -> ExitCode {
    sdk_main("turbomcp_client", "TurboMCP", run)
}

async fn run(plan: Plan) -> Result<(), String> {
    let program = plan.command.get_program().to_string_lossy().into_owned();
    // With TurboMCP's own config, it is one line:
    // `ChildwireTransport::new(ChildProcessConfig { command, args, .. })`.
    let transport = ChildwireTransport::from_command(plan.command, Config::default());
    let exit = transport.exit_handle();
    let client = Client::new(transport);
    println!("-> initialize ({program})");
    let result = session(&client, plan.call).await;
    // Disconnects the transport: the graceful shutdown.
    let closed = client.shutdown().await;
    match exit.wait().await {
        Some(report) => println!("server {report}"),
        None => println!("server: its end is unknown"),
    }
    result?;
    closed.map_err(|err| format!("shutting down failed: {err}"))?;
    Ok(())
}

async fn session(
    client: &Client<ChildwireTransport>,
    call: Option<(String, serde_json::Map<String, serde_json::Value>)>,
) -> Result<(), String> {
    let info = client
        .initialize()
        .await
        .map_err(|err| format!("the handshake failed: {err}"))?;
    println!(
        "<- initialize: protocol {}; server: {} {}",
        info.protocol_version, info.server_info.name, info.server_info.version
    );
    let tools = client
        .list_tools()
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
    let args: HashMap<String, serde_json::Value> = args.into_iter().collect();
    let result = client
        .call_tool(&name, Some(args), None)
        .await
        .map_err(|err| format!("tools/call failed: {err}"))?;
    for content in &result.content {
        match serde_json::to_value(content) {
            Ok(serde_json::Value::Object(object))
                if object.get("type").and_then(|t| t.as_str()) == Some("text") =>
            {
                println!(
                    "<- result: {}",
                    object.get("text").and_then(|t| t.as_str()).unwrap_or("")
                );
            }
            Ok(other) => println!("<- result: {other}"),
            Err(err) => println!("<- result (unprintable: {err})"),
        }
    }
    if result.is_error == Some(true) {
        return Err("the tool reported an error".into());
    }
    Ok(())
}
