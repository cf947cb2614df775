//! How `mcp_client` puts what the server sent into words: pure functions
//! from JSON to lines of text.

use std::time::Duration;

use serde_json::Value;

/// Longest piece of server-sent text printed on one line, in characters.
const CLIP_CHARS: usize = 200;

/// `30 s`, `0.5 s`.
pub fn seconds(duration: Duration) -> String {
    format!("{} s", duration.as_secs_f64())
}

/// `text` on one line, cut at `CLIP_CHARS`.
pub fn clip(text: &str) -> String {
    let line = text.replace(['\n', '\r'], " ");
    match line.char_indices().nth(CLIP_CHARS) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line,
    }
}

/// A server notification, on one line.
pub fn notification(method: &str, params: Option<&Value>) -> String {
    match (method, params) {
        // MCP logging: show level and data as a log line would.
        ("notifications/message", Some(params)) => {
            let level = params.get("level").and_then(Value::as_str).unwrap_or("log");
            let data = match params.get("data") {
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => String::new(),
            };
            format!("{method} [{level}] {}", clip(&data))
        }
        (_, Some(params)) => format!("{method} {}", clip(&params.to_string())),
        (_, None) => method.to_owned(),
    }
}

/// What an `initialize` result says about the server, one fact per line.
pub fn server(result: &Value) -> Vec<String> {
    let info = result.get("serverInfo");
    let field = |name| {
        info.and_then(|info| info.get(name))
            .and_then(Value::as_str)
            .unwrap_or("?")
    };
    let capabilities = match result.get("capabilities") {
        Some(Value::Object(caps)) if !caps.is_empty() => {
            // Sorted here: the map's own order depends on serde_json's
            // `preserve_order`, which a dependency may turn on (TurboMCP does).
            let mut names: Vec<&str> = caps.keys().map(String::as_str).collect();
            names.sort_unstable();
            names.join(", ")
        }
        _ => "none".to_owned(),
    };
    let mut lines = vec![
        format!("server: {} {}", field("name"), field("version")),
        format!("capabilities: {capabilities}"),
    ];
    if let Some(instructions) = result.get("instructions").and_then(Value::as_str) {
        lines.push(format!("instructions: {}", clip(instructions)));
    }
    lines
}

/// A tool as a call signature: `add(a: number, b: number)`, optional
/// parameters marked `?`.
pub fn signature(tool: &Value) -> String {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or("?");
    let schema = tool.get("inputSchema");
    let required: Vec<&str> = schema
        .and_then(|s| s.get("required"))
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let params: Vec<String> = match schema.and_then(|s| s.get("properties")) {
        Some(Value::Object(properties)) => properties
            .iter()
            .map(|(param, spec)| {
                let optional = if required.contains(&param.as_str()) {
                    ""
                } else {
                    "?"
                };
                match spec.get("type").and_then(Value::as_str) {
                    Some(kind) => format!("{param}{optional}: {kind}"),
                    None => format!("{param}{optional}"),
                }
            })
            .collect(),
        _ => Vec::new(),
    };
    format!("{name}({})", params.join(", "))
}

/// The tool list, one aligned line per tool: signature, then the first
/// line of its description.
pub fn tools(tools: &[Value]) -> Vec<String> {
    let signatures: Vec<String> = tools.iter().map(signature).collect();
    let width = signatures
        .iter()
        .map(|s| s.chars().count())
        .max()
        .unwrap_or(0);
    tools
        .iter()
        .zip(&signatures)
        .map(|(tool, signature)| {
            let description = tool
                .get("description")
                .and_then(Value::as_str)
                .and_then(|d| d.lines().next())
                .unwrap_or("");
            format!("{signature:width$}  {}", clip(description))
                .trim_end()
                .to_owned()
        })
        .collect()
}

/// A `tools/call` result: one line per content item (and the structured
/// content, if any), and whether the tool reported an error.
pub fn call_result(result: &Value) -> (Vec<String>, bool) {
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let mut lines: Vec<String> = result
        .get("content")
        .and_then(Value::as_array)
        .map(|items| items.iter().map(content_item).collect())
        .unwrap_or_default();
    if let Some(structured) = result.get("structuredContent") {
        lines.push(format!("structured: {}", clip(&structured.to_string())));
    }
    if lines.is_empty() {
        lines.push("(no content)".to_owned());
    }
    (lines, is_error)
}

fn content_item(item: &Value) -> String {
    let text = |name| item.get(name).and_then(Value::as_str).unwrap_or("?");
    match item.get("type").and_then(Value::as_str) {
        Some("text") => clip(text("text")),
        Some(kind @ ("image" | "audio")) => format!("[{kind} {}]", text("mimeType")),
        Some("resource_link") => format!("[resource link {}]", text("uri")),
        Some("resource") => format!(
            "[resource {}]",
            item.pointer("/resource/uri")
                .and_then(Value::as_str)
                .unwrap_or("?")
        ),
        _ => clip(&item.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn tools_are_listed_as_aligned_signatures_with_their_descriptions() {
        let tools = tools(&[
            json!({"name":"echo","description":"Says it back.\nMore.","inputSchema":{
                "type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}),
            json!({"name":"now","inputSchema":{"type":"object","properties":{"tz":{"type":"string"}}}}),
        ]);
        assert_eq!(
            tools,
            ["echo(text: string)  Says it back.", "now(tz?: string)"]
        );
    }

    #[test]
    fn call_results_show_each_content_item_and_the_error_flag() {
        let (lines, is_error) = call_result(&json!({
            "content": [
                {"type":"text","text":"42"},
                {"type":"image","mimeType":"image/png","data":"..."}
            ],
            "isError": false
        }));
        assert_eq!(lines, ["42", "[image image/png]"]);
        assert!(!is_error);
        let (lines, is_error) = call_result(&json!({"content": [], "isError": true}));
        assert_eq!(lines, ["(no content)"]);
        assert!(is_error);
    }

    #[test]
    fn log_notifications_read_like_log_lines_and_long_text_is_clipped() {
        let line = notification(
            "notifications/message",
            Some(&json!({"level":"info","data":"hello"})),
        );
        assert_eq!(line, "notifications/message [info] hello");
        let long = "x".repeat(CLIP_CHARS + 10);
        assert_eq!(clip(&long).chars().count(), CLIP_CHARS + 1);
        assert_eq!(clip("a\nb"), "a b");
    }

    #[test]
    fn the_server_summary_names_it_and_its_capabilities() {
        let lines = server(&json!({
            "protocolVersion":"2025-06-18",
            "capabilities":{"tools":{},"logging":{}},
            "serverInfo":{"name":"s","version":"1.0"}
        }));
        assert_eq!(lines, ["server: s 1.0", "capabilities: logging, tools"]);
    }
}
