//! `misbehave mcp`: a small MCP server that does what the share's tests
//! need: answers slowly, crashes on demand, floods, and says what it was
//! told (cancellations, initializations).
//!
//! - `initialize`: answers with the protocol version asked for; counted.
//! - `notifications/initialized`: counted. `notifications/cancelled`: its
//!   `requestId` recorded, and a `slow` call with that id is not answered.
//! - `ping`: `{}`.
//! - `tools/call` by `params.name`, with `params.arguments`:
//!   - `echo`: `{"echo": ARGUMENTS}` at once;
//!   - `slow` (`{"ms": N}`): a `notifications/progress` first when the
//!     request has a progress token, then `{"echo": ARGUMENTS}` after N ms,
//!     unless cancelled meanwhile;
//!   - `flood` (`{"count": N, "size": S}`): N `notifications/message` of
//!     S bytes of data, then `{"flooded": N}`;
//!   - `crash` (`{"code": C}`): exits with C (default 3) without answering;
//!   - `stats`: `{"cancelled": [IDS], "initialize": N, "initialized": N,
//!     "pid": PID}`.
//! - Anything else with an id: error -32601. Stdin's EOF: exit 0.

use std::collections::HashSet;
use std::io::{self, BufRead, Write};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

#[derive(Default)]
struct Told {
    cancelled: Vec<Value>,
    cancelled_keys: HashSet<String>,
    initialize: u32,
    initialized: u32,
}

type Shared<T> = Arc<Mutex<T>>;

fn write(out: &Shared<io::Stdout>, message: &Value) -> io::Result<()> {
    let mut out = out.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let mut line = message.to_string();
    line.push('\n');
    out.write_all(line.as_bytes())?;
    out.flush()
}

fn answer(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

pub(crate) fn serve() -> io::Result<()> {
    let out: Shared<io::Stdout> = Arc::new(Mutex::new(io::stdout()));
    let told: Shared<Told> = Arc::default();
    for line in io::stdin().lock().lines() {
        let line = line?;
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            write(
                &out,
                &json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "Parse error"}}),
            )?;
            continue;
        };
        let method = message["method"].as_str().unwrap_or_default();
        let id = message.get("id").cloned();
        let params = &message["params"];
        let Some(id) = id else {
            let mut told = told.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            match method {
                "notifications/initialized" => told.initialized += 1,
                "notifications/cancelled" => {
                    let request = params["requestId"].clone();
                    told.cancelled_keys.insert(request.to_string());
                    told.cancelled.push(request);
                }
                _ => {}
            }
            continue;
        };
        if method.is_empty() {
            // A response to a request of ours: there are none.
            continue;
        }
        match method {
            "initialize" => {
                told.lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .initialize += 1;
                let version = params["protocolVersion"].clone();
                write(
                    &out,
                    &answer(
                        &id,
                        json!({"protocolVersion": version, "capabilities": {"tools": {}},
                            "serverInfo": {"name": "misbehave", "version": "1"}}),
                    ),
                )?;
            }
            "ping" => write(&out, &answer(&id, json!({})))?,
            "tools/call" => {
                let arguments = params["arguments"].clone();
                match params["name"].as_str().unwrap_or_default() {
                    "echo" => write(&out, &answer(&id, json!({"echo": arguments})))?,
                    "slow" => {
                        let ms = arguments["ms"].as_u64().unwrap_or(0);
                        if let Some(token) = params["_meta"].get("progressToken") {
                            write(
                                &out,
                                &json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                    "params": {"progressToken": token, "progress": 0}}),
                            )?;
                        }
                        let (out, told) = (Arc::clone(&out), Arc::clone(&told));
                        thread::spawn(move || {
                            let until = Instant::now() + Duration::from_millis(ms);
                            let key = id.to_string();
                            loop {
                                if told
                                    .lock()
                                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                                    .cancelled_keys
                                    .contains(&key)
                                {
                                    return;
                                }
                                let now = Instant::now();
                                if now >= until {
                                    break;
                                }
                                thread::sleep((until - now).min(Duration::from_millis(5)));
                            }
                            let _ = write(&out, &answer(&id, json!({"echo": arguments})));
                        });
                    }
                    "flood" => {
                        let count = arguments["count"].as_u64().unwrap_or(0);
                        let data = "x".repeat(arguments["size"].as_u64().unwrap_or(0) as usize);
                        for n in 0..count {
                            write(
                                &out,
                                &json!({"jsonrpc": "2.0", "method": "notifications/message",
                                    "params": {"level": "info", "data": data, "n": n}}),
                            )?;
                        }
                        write(&out, &answer(&id, json!({"flooded": count})))?;
                    }
                    "crash" => {
                        let code = arguments["code"].as_i64().unwrap_or(3);
                        std::process::exit(i32::try_from(code).unwrap_or(3));
                    }
                    "stats" => {
                        let told = told.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                        let stats = json!({"cancelled": told.cancelled, "initialize": told.initialize,
                            "initialized": told.initialized, "pid": std::process::id()});
                        drop(told);
                        write(&out, &answer(&id, stats))?;
                    }
                    other => write(
                        &out,
                        &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32602,
                            "message": format!("unknown tool {other}")}}),
                    )?,
                }
            }
            other => write(
                &out,
                &json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601,
                    "message": format!("unknown method {other}")}}),
            )?,
        }
    }
    Ok(())
}
