"""An MCP server (stdio JSON-RPC, written by hand) whose one tool, get_time, has the inputSchema given as argv[1].

The SDK's servers make a tool's schema from its Python signature; the red-team cases need the exact
schema of issue 35, so this speaks the few messages a client sends: initialize, tools/list, tools/call.
"""

import json
import sys


def answer(message_id: object, result: object) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id, "result": result}) + "\n")
    sys.stdout.flush()


def main() -> None:
    schema = json.loads(sys.argv[1])
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method, message_id = message.get("method"), message.get("id")
        if message_id is None:
            continue  # a notification (initialized, cancelled): nothing to answer
        if method == "initialize":
            answer(message_id, {"protocolVersion": message["params"]["protocolVersion"],
                                "capabilities": {"tools": {}}, "serverInfo": {"name": "schema", "version": "1"}})
        elif method == "tools/list":
            answer(message_id, {"tools": [{"name": "get_time", "description": "The time in a time zone.",
                                           "inputSchema": schema}]})
        elif method == "tools/call":
            zone = (message["params"].get("arguments") or {}).get("zone", "?")
            answer(message_id, {"content": [{"type": "text", "text": f"12:00 in {zone}"}], "isError": False})
        elif method == "ping":
            answer(message_id, {})
        else:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": message_id,
                                         "error": {"code": -32601, "message": f"no method {method}"}}) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
