//! keel's protected MCP server (keel-tools-mcp's `auth`) against peers nobody here wrote: tokens minted by PyJWT
//! with an EC key made in Python, the JWKS written by it, and the official Python MCP SDK connecting over
//! Streamable HTTP with each token (`tests/mcp/python_auth.py`). A valid token lists and calls as its subject;
//! every other is refused with the status and challenge the MCP authorization specification names.
//!
//! The SDKs live in the venv `target/provider-venv` (`scripts/provider-sdks.sh`, with `mcp` and `PyJWT`).

use std::path::Path;
use std::process::Command;

use keel_tools_core::{CallContext, Executor, Registry, ToolError, tool};
use keel_tools_mcp::http::auth::{JwtVerifier, ResourceServer};
use keel_tools_mcp::{HttpConfig, McpServer};
use serde_json::{Value, json};

/// Says whom the call is for.
#[tool(name = "auth_peers.whoami", effect = "read", version = "1.0")]
async fn whoami(ctx: CallContext) -> Result<String, ToolError> {
    Ok(ctx.principal().unwrap_or("nobody").to_owned())
}

const ISSUER: &str = "https://auth.keel.test";

fn python(root: &Path, args: &[&str]) -> String {
    let python = root.join("target").join("provider-venv").join("bin").join("python");
    let output = Command::new(python)
        .arg(root.join("tests").join("mcp").join("python_auth.py"))
        .args(args)
        .output()
        .expect("python starts");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(output.status.success(), "python_auth.py {args:?}:\n{stdout}{}", String::from_utf8_lossy(&output.stderr));
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_sdk_with_pyjwt_tokens_is_served_or_refused_as_the_spec_says() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf();
    let venv = root.join("target").join("provider-venv").join("bin").join("python");
    let has_jwt =
        venv.exists() && Command::new(&venv).args(["-c", "import jwt, mcp"]).status().is_ok_and(|s| s.success());
    if !has_jwt {
        keel_tests::missing_peer(&keel_tests::peers::PROVIDER_SDKS, "target/provider-venv lacks mcp or PyJWT");
        return;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let resource = format!("{base}/mcp");
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("auth-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let dir_text = dir.to_str().unwrap().to_owned();
    let (root_for_mint, resource_for_mint) = (root.clone(), resource.clone());
    let mint = dir_text.clone();
    tokio::task::spawn_blocking(move || python(&root_for_mint, &["mint", &mint, &resource_for_mint, ISSUER]))
        .await
        .unwrap();

    let verifier = JwtVerifier::from_jwks_file(ISSUER, &resource, dir.join("jwks.json")).expect("PyJWT's JWKS");
    let protected =
        ResourceServer::new(resource.clone(), verifier).authorization_server(ISSUER).require_scopes(["mcp"]);
    let view = Registry::from_inventory().unwrap().view().names(["auth_peers.whoami"]).build().unwrap();
    let server = McpServer::new(Executor::new(view).unwrap()).unwrap();
    let service = server.http_service(HttpConfig::default().auth(protected));
    let stop = tokio_util::sync::CancellationToken::new();
    let shutdown = stop.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", shutdown).await });

    let url = resource.clone();
    let out = tokio::task::spawn_blocking(move || python(&root, &["connect", &url, &dir_text])).await.unwrap();
    stop.cancel();
    let seen: Value = serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("{e}: {out}"));

    assert_eq!(seen["valid"], json!({"tools": ["auth_peers.whoami"], "whoami": "alice"}), "{seen:#}");
    assert_eq!(seen["bob"]["whoami"], "bob", "{seen:#}");
    let metadata = format!("resource_metadata=\"{base}/.well-known/oauth-protected-resource/mcp\"");
    for (case, status, error, says) in [
        ("expired", 401, "invalid_token", "expired"),
        ("another_audience", 401, "invalid_token", "another resource"),
        ("another_issuer", 401, "invalid_token", "another issuer"),
        ("unknown_key", 401, "invalid_token", "unknown"),
        ("another_key_same_kid", 401, "invalid_token", "signature"),
        ("unsigned", 401, "invalid_token", "not a signed JWT"),
        ("hmac_with_the_public_key", 401, "invalid_token", "not accepted"),
        ("without_the_scope", 403, "insufficient_scope", "scope=\"mcp\""),
    ] {
        let got = &seen[case];
        assert_eq!(got["status"], status, "{case}: {got}");
        let challenge = got["challenge"].as_str().unwrap_or_default();
        assert!(
            challenge.starts_with("Bearer ") && challenge.contains(&format!("error=\"{error}\"")),
            "{case}: {challenge}"
        );
        assert!(challenge.contains(says) && challenge.contains(&metadata), "{case}: {challenge}");
    }
}
