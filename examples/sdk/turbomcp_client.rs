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

use childwire::{Command, Config, ExitHandle};
use childwire_sdk_examples::sdk_client::{
    SdkClient, SdkError, ServerInfo, Tool, ToolResult, sdk_main,
};
use childwire_turbomcp::ChildwireTransport;
use serde_json::{Map, Value};
use turbomcp_client::Client;

fn main() -> ExitCode {
    sdk_main::<Turbomcp>("turbomcp_client", "TurboMCP")
}

/// TurboMCP's client over childwire's transport.
struct Turbomcp(Client<ChildwireTransport>);

impl SdkClient for Turbomcp {
    fn connect(command: Command) -> Result<(Self, ExitHandle), SdkError> {
        // With TurboMCP's own config, it is one line:
        // `ChildwireTransport::new(ChildProcessConfig { command, args, .. })`.
        // The server starts at the handshake.
        let transport = ChildwireTransport::from_command(command, Config::default());
        let exit = transport.exit_handle();
        Ok((Self(Client::new(transport)), exit))
    }

    async fn initialize(&mut self) -> Result<Option<ServerInfo>, SdkError> {
        let info = self.0.initialize().await?;
        Ok(Some(ServerInfo {
            protocol: info.protocol_version.to_string(),
            server: format!("{} {}", info.server_info.name, info.server_info.version),
        }))
    }

    async fn list_tools(&self) -> Result<Vec<Tool>, SdkError> {
        let tools = self.0.list_tools().await?;
        Ok(tools
            .into_iter()
            .map(|tool| Tool {
                description: tool.description.unwrap_or_default(),
                name: tool.name,
            })
            .collect())
    }

    async fn call_tool(
        &self,
        name: String,
        args: Map<String, Value>,
    ) -> Result<ToolResult, SdkError> {
        let args: HashMap<String, Value> = args.into_iter().collect();
        let result = self.0.call_tool(&name, Some(args), None).await?;
        Ok(ToolResult::new(
            result.content.iter().map(printable),
            result.is_error,
        ))
    }

    async fn shutdown(self) -> Result<(), SdkError> {
        // Disconnects the transport: the graceful shutdown.
        Ok(self.0.shutdown().await?)
    }
}

/// A content item as the example prints it: a text item's text (as rmcp's
/// `as_text` gives it), anything else as JSON.
fn printable(content: &impl serde::Serialize) -> String {
    match serde_json::to_value(content) {
        Ok(Value::Object(object)) if object.get("type").and_then(Value::as_str) == Some("text") => {
            object
                .get("text")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        }
        Ok(other) => other.to_string(),
        Err(err) => format!("(unprintable: {err})"),
    }
}
