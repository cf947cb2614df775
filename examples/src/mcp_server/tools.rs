//! The example server's tools: their definitions for `tools/list` and their
//! behaviour for `tools/call`.
//!
//! Arguments are checked by hand against the same rules the published JSON
//! Schemas state, so what `tools/list` promises is what `tools/call` enforces.

use serde_json::{Map, Number, Value, json};

use super::jsonrpc::kind;

/// The tools this server offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tool {
    Echo,
    Add,
}

impl Tool {
    const ALL: [Tool; 2] = [Tool::Echo, Tool::Add];

    pub(super) fn find(name: &str) -> Option<Tool> {
        Self::ALL.into_iter().find(|tool| tool.name() == name)
    }

    pub(super) fn name(self) -> &'static str {
        match self {
            Tool::Echo => "echo",
            Tool::Add => "add",
        }
    }

    /// The `tools/list` entry: name, description and input schema.
    fn definition(self) -> Value {
        match self {
            Tool::Echo => json!({
                "name": self.name(),
                "description": "Returns the text it is given, unchanged.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "text": { "type": "string", "description": "The text to send back." }
                    },
                    "required": ["text"],
                    "additionalProperties": false,
                },
            }),
            Tool::Add => json!({
                "name": self.name(),
                "description": "Adds two numbers and returns the sum.",
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "a": { "type": "number", "description": "The first addend." },
                        "b": { "type": "number", "description": "The second addend." }
                    },
                    "required": ["a", "b"],
                    "additionalProperties": false,
                },
            }),
        }
    }

    /// Runs the tool. `Err` is a tool execution error: the caller reports it
    /// as a result with `isError: true`, so the model can read it and retry.
    pub(super) fn call(self, arguments: Option<Value>) -> Result<String, String> {
        match self {
            Tool::Echo => {
                let arguments = object(arguments, &["text"])?;
                Ok(string(&arguments, "text")?.to_owned())
            }
            Tool::Add => {
                let arguments = object(arguments, &["a", "b"])?;
                let sum = add(number(&arguments, "a")?, number(&arguments, "b")?)?;
                Ok(sum.to_string())
            }
        }
    }
}

/// The `tools` array of a `tools/list` result.
pub(super) fn definitions() -> Value {
    Value::Array(Tool::ALL.into_iter().map(Tool::definition).collect())
}

/// Checks that `arguments` is an object holding no property outside
/// `allowed` (the schemas say `additionalProperties: false`). Absent or null
/// arguments count as `{}`, so a missing required property is reported by name.
fn object(arguments: Option<Value>, allowed: &[&str]) -> Result<Map<String, Value>, String> {
    let arguments = match arguments {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(arguments)) => arguments,
        Some(other) => {
            return Err(format!("arguments must be an object, got {}", kind(&other)));
        }
    };
    if let Some(unexpected) = arguments
        .keys()
        .find(|key| !allowed.contains(&key.as_str()))
    {
        return Err(format!(
            "unexpected argument `{unexpected}` (expected: {})",
            allowed.join(", ")
        ));
    }
    Ok(arguments)
}

fn string<'a>(arguments: &'a Map<String, Value>, name: &str) -> Result<&'a str, String> {
    match arguments.get(name) {
        Some(Value::String(text)) => Ok(text),
        Some(other) => Err(format!(
            "argument `{name}` must be a string, got {}",
            kind(other)
        )),
        None => Err(format!("missing required argument `{name}` (a string)")),
    }
}

fn number<'a>(arguments: &'a Map<String, Value>, name: &str) -> Result<&'a Number, String> {
    match arguments.get(name) {
        Some(Value::Number(number)) => Ok(number),
        Some(other) => Err(format!(
            "argument `{name}` must be a number, got {}",
            kind(other)
        )),
        None => Err(format!("missing required argument `{name}` (a number)")),
    }
}

/// Integers add exactly while the sum fits in an `i64`; anything else is
/// added as `f64`, the precision JSON numbers promise.
fn add(a: &Number, b: &Number) -> Result<Number, String> {
    if let Some(sum) = a
        .as_i64()
        .zip(b.as_i64())
        .and_then(|(a, b)| a.checked_add(b))
    {
        return Ok(sum.into());
    }
    let (Some(a), Some(b)) = (a.as_f64(), b.as_f64()) else {
        return Err("the addends are not representable as numbers".to_owned());
    };
    Number::from_f64(a + b).ok_or_else(|| format!("the sum of {a} and {b} is not a finite number"))
}
