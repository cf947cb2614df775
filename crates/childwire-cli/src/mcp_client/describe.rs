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
    aligned(
        tools
            .iter()
            .map(|tool| (signature(tool), first_line(tool, "description").to_owned()))
            .collect(),
    )
}

/// The first line of `item`'s text field `name`, or nothing.
fn first_line<'a>(item: &'a Value, name: &str) -> &'a str {
    item.get(name)
        .and_then(Value::as_str)
        .and_then(|text| text.lines().next())
        .unwrap_or("")
}

/// Rows of a name and what it is about, the names padded to one width
/// and the rest clipped.
fn aligned(rows: Vec<(String, String)>) -> Vec<String> {
    let width = rows
        .iter()
        .map(|(name, _)| name.chars().count())
        .max()
        .unwrap_or(0);
    rows.into_iter()
        .map(|(name, about)| {
            format!("{name:width$}  {}", clip(about.trim()))
                .trim_end()
                .to_owned()
        })
        .collect()
}

/// The resource list, one aligned line per resource: URI, then its name
/// (or title), MIME type and the first line of its description.
pub fn resources(resources: &[Value]) -> Vec<String> {
    let text = |item: &Value, name| item.get(name).and_then(Value::as_str).map(str::to_owned);
    aligned(
        resources
            .iter()
            .map(|item| {
                let mut about = text(item, "title")
                    .or_else(|| text(item, "name"))
                    .unwrap_or_default();
                if let Some(mime) = text(item, "mimeType") {
                    about = format!("{about} ({mime})");
                }
                let description = first_line(item, "description");
                if !description.is_empty() {
                    about = format!("{about}: {description}");
                }
                (text(item, "uri").unwrap_or_else(|| "?".to_owned()), about)
            })
            .collect(),
    )
}

/// The prompt list, one aligned line per prompt: `greet(name, style?)`,
/// optional arguments marked `?`, then the first line of its description.
pub fn prompts(prompts: &[Value]) -> Vec<String> {
    aligned(
        prompts
            .iter()
            .map(|prompt| {
                let name = prompt.get("name").and_then(Value::as_str).unwrap_or("?");
                let arguments: Vec<String> = prompt
                    .get("arguments")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|argument| {
                        let name = argument.get("name").and_then(Value::as_str).unwrap_or("?");
                        let required =
                            argument.get("required").and_then(Value::as_bool) == Some(true);
                        format!("{name}{}", if required { "" } else { "?" })
                    })
                    .collect();
                let signature = format!("{name}({})", arguments.join(", "));
                (signature, first_line(prompt, "description").to_owned())
            })
            .collect(),
    )
}

/// A `resources/read` result: one line per content, its text or what kind
/// of blob it is.
pub fn read_result(result: &Value) -> Vec<String> {
    let lines: Vec<String> = result
        .get("contents")
        .and_then(Value::as_array)
        .map(|contents| {
            contents
                .iter()
                .map(|content| {
                    let mime = content
                        .get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("no MIME type");
                    match (content.get("text"), content.get("blob")) {
                        (Some(Value::String(text)), _) => clip(text),
                        (_, Some(Value::String(blob))) => {
                            format!("[blob {mime}, {} base64 characters]", blob.len())
                        }
                        _ => clip(&content.to_string()),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    if lines.is_empty() {
        vec!["(no contents)".to_owned()]
    } else {
        lines
    }
}

/// A `prompts/get` result: one line per message, `role: text`.
pub fn prompt_result(result: &Value) -> Vec<String> {
    let lines: Vec<String> = result
        .get("messages")
        .and_then(Value::as_array)
        .map(|messages| {
            messages
                .iter()
                .map(|message| {
                    let role = message.get("role").and_then(Value::as_str).unwrap_or("?");
                    let content = message
                        .get("content")
                        .map_or_else(String::new, content_item);
                    format!("{role}: {content}")
                })
                .collect()
        })
        .unwrap_or_default();
    if lines.is_empty() {
        vec!["(no messages)".to_owned()]
    } else {
        lines
    }
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
    fn resources_and_prompts_are_listed_one_aligned_line_each() {
        let resources = resources(&[
            json!({"uri":"example://readme","name":"readme","mimeType":"text/plain",
                   "description":"About.\nMore."}),
            json!({"uri":"file:///x","name":"x"}),
        ]);
        assert_eq!(
            resources,
            [
                "example://readme  readme (text/plain): About.",
                "file:///x         x"
            ]
        );
        let prompts = prompts(&[
            json!({"name":"greet","description":"Says hi.","arguments":[
                {"name":"name","required":true},{"name":"style"}]}),
            json!({"name":"bare"}),
        ]);
        assert_eq!(prompts, ["greet(name, style?)  Says hi.", "bare()"]);
    }

    #[test]
    fn read_and_prompt_results_show_each_content_and_message() {
        let read = read_result(&json!({"contents":[
            {"uri":"a","text":"hello"},
            {"uri":"b","mimeType":"image/png","blob":"AAAA"}
        ]}));
        assert_eq!(read, ["hello", "[blob image/png, 4 base64 characters]"]);
        assert_eq!(read_result(&json!({})), ["(no contents)"]);
        let prompt = prompt_result(&json!({"messages":[
            {"role":"user","content":{"type":"text","text":"Greet Ada."}}
        ]}));
        assert_eq!(prompt, ["user: Greet Ada."]);
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
