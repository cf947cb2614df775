#!/usr/bin/env python3
"""The host that made the recordings here: runs COMMAND (a relay with --log in
front of the server), sends initialize, notifications/initialized, tools/list,
one tools/call (TOOL with ARGS, JSON) and ping, waiting for each response
before the next request, then closes the server's stdin and waits for it.

    python3 record.py TOOL ARGS COMMAND...
"""

import json
import subprocess
import sys


def main():
    tool, arguments, command = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
    server = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    requests = [
        ("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "childwire-recorder", "version": "0.1.0"}}),
        ("notifications/initialized", None),
        ("tools/list", None),
        ("tools/call", {"name": tool, "arguments": arguments}),
        ("ping", None),
    ]
    next_id = 1
    for method, params in requests:
        notification = method.startswith("notifications/")
        message = {"jsonrpc": "2.0"} if notification else {"jsonrpc": "2.0", "id": next_id}
        message["method"] = method
        if params is not None:
            message["params"] = params
        server.stdin.write(json.dumps(message, separators=(",", ":")) + "\n")
        server.stdin.flush()
        if notification:
            continue
        # Messages the server sends first (notifications) are skipped.
        while True:
            line = server.stdout.readline()
            if not line:
                sys.exit(f"the server ended before answering {method}")
            answer = json.loads(line)
            if answer.get("id") == next_id and "method" not in answer:
                break
        next_id += 1
    server.stdin.close()
    server.stdout.read()
    sys.exit(server.wait())


if __name__ == "__main__":
    main()
