//! No schema reference is ever fetched. Every reference below points at a loopback server that answers any request
//! with a valid schema and counts the connections it accepts (`keel_tests::schema_host`): a fetch would both make
//! the reference resolve and be counted. Compiling such a schema fails, the registry refuses a tool that has one
//! (and so does an MCP import, in `mcp_forwarder.rs`), and the counter stays at zero. A reference to a local file
//! that holds a valid schema fails the same way (a read would have made it resolve).

use std::io::{Read, Write};

use keel_tests::schema_host::{SERVED_SCHEMA, SchemaHost};
use keel_tools_core::Registry;
use keel_tools_core::definition::ToolDefinition;
use keel_tools_core::registry::RegistryProblem;
use keel_tools_core::schema::CompiledSchema;
use serde_json::{Value, json};

/// Object schemas whose property `a` refers outside the schema: absolute, with a fragment, through `$defs`, relative
/// to an `$id` on the host, through `allOf`, and to a file on disk.
fn remote_schemas(host: &SchemaHost, file: &str) -> Vec<Value> {
    let object = |a: Value| json!({"type": "object", "properties": {"a": a}});
    vec![
        object(json!({"$ref": host.url("a.json")})),
        object(json!({"$ref": host.url("a.json#/$defs/x")})),
        json!({"$defs": {"x": {"$ref": host.url("x.json")}}, "type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}}),
        json!({"$id": host.url("base/root.json"), "type": "object", "properties": {"a": {"$ref": "other.json"}}}),
        object(json!({"allOf": [{"$ref": host.url("all.json")}]})),
        object(json!({"$ref": format!("file://{file}")})),
    ]
}

/// A file holding a valid schema, removed when dropped.
struct SchemaFile(std::path::PathBuf);

impl SchemaFile {
    fn new(name: &str) -> SchemaFile {
        let path = std::env::temp_dir().join(format!("keel-schema-refs-{}-{name}.json", std::process::id()));
        std::fs::write(&path, SERVED_SCHEMA).expect("write the schema file");
        SchemaFile(path)
    }
    fn path(&self) -> String {
        self.0.display().to_string()
    }
}

impl Drop for SchemaFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// The counter counts: a plain HTTP request to the host is one connection, and it gets the schema.
#[test]
fn the_fetch_counter_counts_a_fetch() {
    let host = SchemaHost::start();
    let url = host.url("a.json");
    let authority = url.trim_start_matches("http://").split('/').next().unwrap().to_owned();
    let mut stream = std::net::TcpStream::connect(&authority).expect("connect");
    stream.write_all(format!("GET /a.json HTTP/1.1\r\nhost: {authority}\r\n\r\n").as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    assert!(response.starts_with("HTTP/1.1 200") && response.ends_with(SERVED_SCHEMA), "{response}");
    assert_eq!(host.connections(), 1);
}

/// `CompiledSchema::compile` refuses every outside reference and fetches none; a `$schema` naming the host is not
/// fetched either (the schema is compiled as draft 2020-12 whatever it says).
#[test]
fn compiling_a_schema_fetches_no_reference() {
    let host = SchemaHost::start();
    let file = SchemaFile::new("compile");
    for schema in remote_schemas(&host, &file.path()) {
        let err = CompiledSchema::compile(&schema).expect_err(&schema.to_string());
        assert!(err.to_string().starts_with("invalid JSON Schema: "), "{err}");
    }
    let declared = json!({"$schema": host.url("meta.json"), "type": "object"});
    let _ = CompiledSchema::compile(&declared);
    assert_eq!(host.connections(), 0, "a schema reference was fetched");
}

/// A tool whose argument or result schema refers outside itself is refused when the registry is built (a schema
/// problem naming the tool), and nothing is fetched.
#[test]
fn a_registry_fetches_no_reference_of_a_tools_schema() {
    let host = SchemaHost::start();
    let file = SchemaFile::new("executor");
    let mut refused = 0;
    for (i, schema) in remote_schemas(&host, &file.path()).into_iter().enumerate() {
        let input = ToolDefinition::builder(format!("refers_in_{i}"))
            .description("Its arguments refer outside the schema.")
            .input_schema(schema.clone())
            .handler(|_a, _c| async { Ok(json!(1)) });
        let output = ToolDefinition::builder(format!("refers_out_{i}"))
            .description("Its result refers outside the schema.")
            .output_schema(schema.clone())
            .handler(|_a, _c| async { Ok(json!({"a": "x"})) });
        for def in [input, output] {
            let def = def.build().expect("a definition (its schemas are compiled when an executor is built)");
            let name = def.name().to_owned();
            // The registry compiles every schema: it refuses the tool, so no executor can serve it.
            let err =
                Registry::builder().without_inventory().tool(def).build().expect_err(&format!("{name}: {schema}"));
            let schema_problem =
                |p: &RegistryProblem| matches!(p, RegistryProblem::Schema { name: n, .. } if *n == name);
            assert!(err.problems().len() == 1 && schema_problem(&err.problems()[0]), "{err:?}");
            refused += 1;
        }
    }
    assert_eq!(refused, 12);
    assert_eq!(host.connections(), 0, "a reference of a tool's schema was fetched");
}
