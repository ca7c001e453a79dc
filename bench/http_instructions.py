"""Instructions per MCP `tools/call` over Streamable HTTP, counted in keel's server by valgrind's callgrind: the
HTTP figure of record beside the wall-time bench (`bench/examples/mcp_http.rs`), and the way to compare two builds
without the drift of wall time.

    cargo build --release -p keel-bench --features examples --example mcp_http
    python3 bench/http_instructions.py target/release/examples/mcp_http [OTHER_BUILD_OF_mcp_http ...]
    python3 bench/http_instructions.py --auth target/release/examples/mcp_http

With `--auth`, the cost of bearer validation in instructions: for the one build given, keel's server without auth
(`serve keel`) and as a protected resource (`serve keel-auth`, a `JwtVerifier` over an inline JWKS), both sent the
same ES256 token (`mcp_http mint`) on every request; the figure is keel-auth's per call over keel's, per era.

For each build and each era (2025-11-25 with a session, 2026-07-28 stateless), the example's server
(`mcp_http serve keel ADDR`: `McpServer::serve_http` with the default `HttpConfig`) runs under callgrind twice,
answering SMALL and then LARGE calls, one at a time over one keep-alive connection; the figure is the difference of
the two totals divided by the difference of the calls, so the process's start, the session's set-up and the exit
cancel out. Needs valgrind (Debian: `apt-get install valgrind`).
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile

SMALL, LARGE = 200, 1200
TOOL = "test_simple_text"
TEXT = "This is a simple text response for testing."
STATELESS = "2026-07-28"
SESSION = "2025-11-25"


def call_body(era: str, n: int) -> str:
    params: dict = {"name": TOOL, "arguments": {}}
    if era == "stateless":
        params["_meta"] = {
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0.1"},
        }
    return json.dumps({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params})


def drive(port: int, era: str, calls: int, token: str | None = None) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    base = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    if token is not None:
        base["Authorization"] = f"Bearer {token}"
    if era == "session":
        init = {
            "jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": SESSION, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0.1"}},
        }
        conn.request("POST", "/mcp", json.dumps(init), {**base, "MCP-Protocol-Version": SESSION})
        response = conn.getresponse()
        session = response.getheader("Mcp-Session-Id")
        response.read()
        headers = {**base, "MCP-Protocol-Version": SESSION, "Mcp-Session-Id": session}
        conn.request("POST", "/mcp", json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), headers)
        conn.getresponse().read()
    else:
        headers = {**base, "MCP-Protocol-Version": STATELESS, "Mcp-Method": "tools/call", "Mcp-Name": TOOL}
    for n in range(1, calls + 1):
        conn.request("POST", "/mcp", call_body(era, n), headers)
        response = conn.getresponse()
        body = response.read().decode()
        if response.status != 200 or TEXT not in body:
            raise SystemExit(f"call {n} ({era}) was not answered with the tool's text: {response.status} {body[:200]}")
    conn.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def total(binary: str, era: str, calls: int, kind: str = "keel", keep: str | None = None) -> int:
    """Callgrind's total for `calls` calls; with `keep`, its output file is copied there (for callgrind_annotate)."""
    env, token, addr = dict(os.environ), None, "127.0.0.1:0"
    if kind in ("keel-auth", "keel-token"):
        # The token's audience is the protected server's resource URI, so the port is chosen before the token.
        port = free_port()
        addr = f"127.0.0.1:{port}"
        jwks, token = subprocess.run(
            [binary, "mint", f"http://{addr}/mcp"], check=True, capture_output=True, text=True
        ).stdout.split("\n")[:2]
        env["MCP_HTTP_JWKS"] = jwks
    serve_kind = "keel" if kind == "keel-token" else kind
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "cg.out")
        server = subprocess.Popen(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", binary, "serve", serve_kind, addr],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
        )
        try:
            address = server.stdout.readline().strip()
            port = int(address.rsplit(":", 1)[1])
            drive(port, era, calls, token)
        finally:
            server.stdin.close()
            server.wait(timeout=300)
        if keep is not None:
            shutil.copyfile(out, keep)
        with open(out) as f:
            for line in f:
                if line.startswith(("summary:", "totals:")):
                    return int(line.split()[1])
    raise SystemExit(f"no total in callgrind's output for {binary}")


def auth(binary: str) -> None:
    # Both servers get the same token on every request; only keel-auth checks it.
    print(f"instructions per tools/call in the server ({LARGE} - {SMALL} calls, one connection), bearer token sent")
    for era in ("session", "stateless"):
        per_call = {}
        for kind in ("keel-token", "keel-auth"):
            per_call[kind] = (total(binary, era, LARGE, kind) - total(binary, era, SMALL, kind)) // (LARGE - SMALL)
        plain, checked = per_call["keel-token"], per_call["keel-auth"]
        print(f"{era:9}  keel {plain:>9}  keel+auth {checked:>9}  {checked / plain:.3f}x  (+{checked - plain})")


def main() -> None:
    builds = sys.argv[1:]
    if builds[:1] == ["--auth"] and len(builds) == 2:
        auth(builds[1])
        return
    if not builds or "--auth" in builds:
        raise SystemExit(__doc__)
    print(f"instructions per tools/call in the server ({LARGE} - {SMALL} calls, one connection)")
    first: dict[str, int] = {}
    for binary in builds:
        for era in ("session", "stateless"):
            per_call = (total(binary, era, LARGE) - total(binary, era, SMALL)) // (LARGE - SMALL)
            ratio = f"  {per_call / first[era]:.3f}x the first build" if era in first else ""
            first.setdefault(era, per_call)
            print(f"{binary}  {era:9}  {per_call:>9}{ratio}")


if __name__ == "__main__":
    main()
