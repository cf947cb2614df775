//! The example server's one resource and one prompt: enough for a client to
//! list, read and get something (`resources/list`, `resources/read`,
//! `prompts/list`, `prompts/get`).

use serde_json::{Map, Value, json};

/// The URI of the one resource.
pub(super) const README_URI: &str = "example://readme";

/// Its text.
const README_TEXT: &str = "The bundled example server of childwire. Tools: echo, add. \
                           Prompt: greet (argument: name).";

/// The name of the one prompt.
pub(super) const GREET: &str = "greet";

/// The `resources` array of a `resources/list` result.
pub(super) fn resources() -> Value {
    json!([{
        "uri": README_URI,
        "name": "readme",
        "title": "About this server",
        "description": "What the bundled example server offers.",
        "mimeType": "text/plain",
    }])
}

/// The `resources/read` result for `uri`, or `None` for a URI it does not
/// have.
pub(super) fn read(uri: &str) -> Option<Value> {
    (uri == README_URI).then(|| {
        json!({
            "contents": [{ "uri": README_URI, "mimeType": "text/plain", "text": README_TEXT }]
        })
    })
}

/// The `prompts` array of a `prompts/list` result.
pub(super) fn prompts() -> Value {
    json!([{
        "name": GREET,
        "title": "Greeting",
        "description": "Asks the model to greet someone by name.",
        "arguments": [
            { "name": "name", "description": "Who to greet.", "required": true }
        ],
    }])
}

/// Why a prompt cannot be had: JSON-RPC error -32602 with this message.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct PromptError(pub(super) String);

/// The `prompts/get` result for prompt `name` with `arguments`.
pub(super) fn get(
    name: &str,
    arguments: Option<&Map<String, Value>>,
) -> Result<Value, PromptError> {
    if name != GREET {
        return Err(PromptError(format!("Unknown prompt: {name}")));
    }
    let who = match arguments.and_then(|arguments| arguments.get("name")) {
        Some(Value::String(who)) => who,
        Some(_) => {
            return Err(PromptError(
                "Invalid params: prompt argument `name` must be a string".to_owned(),
            ));
        }
        None => {
            return Err(PromptError(
                "Invalid params: missing required prompt argument `name`".to_owned(),
            ));
        }
    };
    Ok(json!({
        "description": "A greeting",
        "messages": [{
            "role": "user",
            "content": { "type": "text", "text": format!("Please greet {who} warmly, in one sentence.") }
        }]
    }))
}
