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

use childwire::{Command, Config, ExitHandle};
use childwire_rmcp::ChildwireTransport;
use childwire_sdk_examples::sdk_client::{
    SdkClient, SdkError, ServerInfo, Tool, ToolResult, sdk_main,
};
use rmcp::model::CallToolRequestParams;
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::{Map, Value};

fn main() -> ExitCode {
    sdk_main::<Rmcp>("rmcp_client", "rmcp")
}

/// rmcp's client: the transport until the handshake (rmcp's `serve` takes
/// it), the running service after.
enum Rmcp {
    Transport(ChildwireTransport<RoleClient>),
    Service(RunningService<RoleClient, ()>),
    /// The handshake failed: rmcp dropped the transport.
    Gone,
}

impl Rmcp {
    fn service(&self) -> Result<&RunningService<RoleClient, ()>, String> {
        match self {
            Self::Service(service) => Ok(service),
            _ => Err("no session: the handshake did not complete".into()),
        }
    }
}

impl SdkClient for Rmcp {
    fn connect(command: Command) -> Result<(Self, ExitHandle), SdkError> {
        let transport = ChildwireTransport::spawn(&command, Config::default())?;
        let exit = transport.exit_handle();
        Ok((Self::Transport(transport), exit))
    }

    async fn initialize(&mut self) -> Result<Option<ServerInfo>, SdkError> {
        let Self::Transport(transport) = std::mem::replace(self, Self::Gone) else {
            return Err("the handshake was already made".into());
        };
        let service = ().serve(transport).await?;
        let info = service.peer_info().map(|info| ServerInfo {
            protocol: info.protocol_version.to_string(),
            server: info
                .server_info
                .as_ref()
                .map(|server| format!("{} {}", server.name, server.version))
                .unwrap_or_else(|| "(unnamed)".into()),
        });
        *self = Self::Service(service);
        Ok(info)
    }

    async fn list_tools(&self) -> Result<Vec<Tool>, SdkError> {
        let tools = self.service()?.list_all_tools().await?;
        Ok(tools
            .into_iter()
            .map(|tool| Tool {
                name: tool.name.into_owned(),
                description: tool.description.as_deref().unwrap_or("").to_owned(),
            })
            .collect())
    }

    async fn call_tool(
        &self,
        name: String,
        args: Map<String, Value>,
    ) -> Result<ToolResult, SdkError> {
        let result = self
            .service()?
            .call_tool(CallToolRequestParams::new(name).with_arguments(args))
            .await?;
        Ok(ToolResult::new(
            result.content.iter().map(printable),
            result.is_error,
        ))
    }

    async fn shutdown(self) -> Result<(), SdkError> {
        if let Self::Service(service) = self {
            // Closing the service closes the transport: the graceful shutdown.
            service.cancel().await?;
        }
        Ok(())
    }
}

/// A content item as the example prints it: a text item's text, anything
/// else as JSON.
fn printable(content: &rmcp::model::ContentBlock) -> String {
    match content.as_text() {
        Some(text) => text.text.clone(),
        None => serde_json::to_string(content).unwrap_or_default(),
    }
}
