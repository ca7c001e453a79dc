"""keel's protected MCP server (feature `auth`) against real peers: tokens minted by PyJWT with an EC key made here,
and the official Python MCP SDK connecting over Streamable HTTP with each of them.

    python tests/mcp/python_auth.py mint DIR RESOURCE ISSUER
        writes DIR/jwks.json (the public key the server trusts) and DIR/tokens.json (one token per case)
    python tests/mcp/python_auth.py connect URL DIR
        connects with each token: initialize, tools/list, tools/call `whoami`; prints one JSON object, per case
        either {"tools": [...], "whoami": ...} or {"status": <HTTP status>, "challenge": <WWW-Authenticate>}

The Rust test `tests/tests/mcp_auth_peers.rs` runs both and checks the outcomes.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import sys
import time
from pathlib import Path

import httpx2
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def mint(directory: Path, resource: str, issuer: str) -> None:
    trusted, stranger, unknown = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    jwk = json.loads(ECAlgorithm.to_jwk(trusted.public_key()))
    jwk.update({"kid": "k1", "alg": "ES256", "use": "sig"})
    (directory / "jwks.json").write_text(json.dumps({"keys": [jwk]}))
    now = int(time.time())

    def claims(**changes):
        c = {"iss": issuer, "aud": resource, "sub": "alice", "scope": "mcp", "iat": now, "exp": now + 300}
        c.update(changes)
        return {k: v for k, v in c.items() if v is not None}

    def es256(key, kid="k1", **changes):
        return jwt.encode(claims(**changes), key, algorithm="ES256", headers={"kid": kid})

    # HS256 with the trusted public key's JWK as the secret: what a verifier that takes the header's word for the
    # algorithm would accept. Built by hand: PyJWT refuses to sign HMAC with key material that looks asymmetric.
    header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": "k1"}).encode())
    payload = b64(json.dumps(claims()).encode())
    secret = json.dumps(jwk).encode()
    signature = b64(hmac.new(secret, f"{header}.{payload}".encode(), hashlib.sha256).digest())
    tokens = {
        "valid": es256(trusted),
        "bob": es256(trusted, sub="bob"),
        "expired": es256(trusted, iat=now - 900, exp=now - 600),
        "another_audience": es256(trusted, aud="https://other.example/mcp"),
        "another_issuer": es256(trusted, iss="https://evil.example"),
        "unknown_key": es256(unknown, kid="k9"),
        "another_key_same_kid": es256(stranger),
        "unsigned": jwt.encode(claims(), None, algorithm="none", headers={"kid": "k1"}),
        "hmac_with_the_public_key": f"{header}.{payload}.{signature}",
        "without_the_scope": es256(trusted, scope="other"),
    }
    (directory / "tokens.json").write_text(json.dumps(tokens))


async def connect(url: str, token: str) -> dict:
    headers = {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        # The refusal as the server sends it, before the SDK's session turns it into an exception.
        probe = await http.post(
            url,
            headers={"Accept": "application/json, text/event-stream", "Content-Type": "application/json"},
            json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "1"}}},
        )
        if probe.status_code != 200:
            return {"status": probe.status_code, "challenge": probe.headers.get("www-authenticate")}
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = [t.name for t in (await session.list_tools()).tools]
                result = await session.call_tool("auth_peers.whoami", {})
                text = result.content[0].text if result.content else None
                return {"tools": tools, "whoami": json.loads(text) if text else None}


async def connect_all(url: str, directory: Path) -> None:
    tokens = json.loads((directory / "tokens.json").read_text())
    out = {}
    for name, token in tokens.items():
        try:
            out[name] = await connect(url, token)
        except Exception as e:  # noqa: BLE001 - what failed is the finding
            out[name] = {"exception": f"{type(e).__name__}: {e}"}
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    if sys.argv[1] == "mint":
        mint(Path(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        asyncio.run(connect_all(sys.argv[2], Path(sys.argv[3])))
