//! Tool results made of MCP content blocks instead of JSON data: [`Content`], its [`ContentBlock`]s (text, image,
//! audio, [`EmbeddedResource`], resource link), and the result schema that marks such a tool for the MCP layer
//! ([`content_schema`], [`is_content_schema`]).

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// The key that marks a result schema as [`Content`]: `"x-keel-content": true` at the schema's top level.
const CONTENT_MARKER: &str = "x-keel-content";

/// Whether a tool's result schema is [`Content`]'s (carries `x-keel-content` set to `true` at its top level).
pub fn is_content_schema(schema: &Value) -> bool {
    schema.get(CONTENT_MARKER).and_then(Value::as_bool) == Some(true)
}

/// A tool result made of MCP content blocks: text, image, audio, embedded resources and resource links, in order.
///
/// Build one with [`Content::text`], [`Content::image`], ... or from blocks ([`Content::from_blocks`],
/// [`Content::with`], [`FromIterator`]). Serializes as the array of blocks.
///
/// Most tools return data (`T: Serialize + JsonSchema`), which MCP serves as `structuredContent` plus the same
/// JSON as text. A tool that produces text for people, an image, audio, a document or a mix of them returns
/// [`Content`] instead:
///
/// ```
/// use keel_tools_core::tool;
/// use keel_tools_core::content::{Content, ContentBlock, EmbeddedResource};
///
/// /// Renders the incident's timeline chart.
/// #[tool(effect = "read", version = "1.0")]
/// fn timeline_chart(incident_id: String) -> Content {
///     Content::text(format!("Timeline of {incident_id}:"))
///         .with(ContentBlock::image_bytes(&[0x89, b'P', b'N', b'G'], "image/png"))
///         .with(ContentBlock::resource(EmbeddedResource::text("incident://INC-1/log", "text/plain", "...")))
/// }
/// ```
///
/// [`Content`] serializes as the array of MCP content blocks (`[{"type": "text", "text": "..."}, {"type":
/// "image", "data": "<base64>", "mimeType": "image/png"}, ...]`). Its JSON Schema is that array, marked with
/// `"x-keel-content": true` (`x-keel-content`): the MCP layer sees the marker on the tool's result schema and
/// serves the blocks as the `content` of the `CallToolResult` (no `structuredContent`, no `outputSchema`); every
/// other provider receives the JSON text of the blocks, as for any other result. The executor validates the value
/// against the schema like any result.
///
/// Binary data (images, audio, blobs) travels base64-encoded, as MCP requires: give already-encoded text
/// ([`ContentBlock::image`]) or raw bytes ([`ContentBlock::image_bytes`], encoded here with the standard alphabet
/// and padding).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Content {
    blocks: Vec<ContentBlock>,
}

/// One MCP content block. Serialized as MCP writes it (`{"type": "text", "text": ...}`,
/// `{"type": "image", "data": ..., "mimeType": ...}`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContentBlock {
    /// Text for the model or the user.
    Text {
        /// The text.
        text: String,
    },
    /// An image.
    Image {
        /// The image, base64-encoded.
        data: String,
        /// Its MIME type, e.g. `image/png`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// Audio.
    Audio {
        /// The audio, base64-encoded.
        data: String,
        /// Its MIME type, e.g. `audio/wav`.
        #[serde(rename = "mimeType")]
        mime_type: String,
    },
    /// A resource whose contents travel inside the result.
    Resource {
        /// The resource.
        resource: EmbeddedResource,
    },
    /// A link to a resource the client may read later.
    ResourceLink {
        /// The resource's URI.
        uri: String,
        /// Its name.
        name: String,
        /// A description of it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// Its MIME type.
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
    },
}

/// The contents of an embedded resource: text or a base64 blob, with its URI and MIME type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EmbeddedResource {
    /// The resource's URI, e.g. `incident://INC-1/log`.
    pub uri: String,
    /// Its MIME type.
    #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Its text (for text resources).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Its bytes, base64-encoded (for binary resources).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
}

impl EmbeddedResource {
    /// A text resource.
    pub fn text(uri: impl Into<String>, mime_type: impl Into<String>, text: impl Into<String>) -> EmbeddedResource {
        EmbeddedResource { uri: uri.into(), mime_type: Some(mime_type.into()), text: Some(text.into()), blob: None }
    }

    /// A binary resource from already base64-encoded data.
    pub fn blob(uri: impl Into<String>, mime_type: impl Into<String>, base64: impl Into<String>) -> EmbeddedResource {
        EmbeddedResource { uri: uri.into(), mime_type: Some(mime_type.into()), text: None, blob: Some(base64.into()) }
    }

    /// A binary resource from raw bytes (encoded here).
    pub fn blob_bytes(uri: impl Into<String>, mime_type: impl Into<String>, bytes: &[u8]) -> EmbeddedResource {
        EmbeddedResource::blob(uri, mime_type, base64_encode(bytes))
    }
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> ContentBlock {
        ContentBlock::Text { text: text.into() }
    }

    /// An image block from already base64-encoded data.
    pub fn image(base64: impl Into<String>, mime_type: impl Into<String>) -> ContentBlock {
        ContentBlock::Image { data: base64.into(), mime_type: mime_type.into() }
    }

    /// An image block from raw bytes (encoded here).
    pub fn image_bytes(bytes: &[u8], mime_type: impl Into<String>) -> ContentBlock {
        ContentBlock::image(base64_encode(bytes), mime_type)
    }

    /// An audio block from already base64-encoded data.
    pub fn audio(base64: impl Into<String>, mime_type: impl Into<String>) -> ContentBlock {
        ContentBlock::Audio { data: base64.into(), mime_type: mime_type.into() }
    }

    /// An audio block from raw bytes (encoded here).
    pub fn audio_bytes(bytes: &[u8], mime_type: impl Into<String>) -> ContentBlock {
        ContentBlock::audio(base64_encode(bytes), mime_type)
    }

    /// An embedded resource block.
    pub fn resource(resource: EmbeddedResource) -> ContentBlock {
        ContentBlock::Resource { resource }
    }

    /// A resource link block.
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> ContentBlock {
        ContentBlock::ResourceLink { uri: uri.into(), name: name.into(), description: None, mime_type: None }
    }

    /// The block's MCP `type`: `text`, `image`, `audio`, `resource` or `resource_link`.
    pub fn kind(&self) -> &'static str {
        match self {
            ContentBlock::Text { .. } => "text",
            ContentBlock::Image { .. } => "image",
            ContentBlock::Audio { .. } => "audio",
            ContentBlock::Resource { .. } => "resource",
            ContentBlock::ResourceLink { .. } => "resource_link",
        }
    }
}

impl Content {
    /// No blocks.
    pub fn new() -> Content {
        Content::default()
    }

    /// These blocks, in order (mixed content).
    pub fn from_blocks(blocks: impl IntoIterator<Item = ContentBlock>) -> Content {
        Content { blocks: blocks.into_iter().collect() }
    }

    /// One text block.
    pub fn text(text: impl Into<String>) -> Content {
        Content::from(ContentBlock::text(text))
    }

    /// One image block from already base64-encoded data.
    pub fn image(base64: impl Into<String>, mime_type: impl Into<String>) -> Content {
        Content::from(ContentBlock::image(base64, mime_type))
    }

    /// One audio block from already base64-encoded data.
    pub fn audio(base64: impl Into<String>, mime_type: impl Into<String>) -> Content {
        Content::from(ContentBlock::audio(base64, mime_type))
    }

    /// One embedded resource block.
    pub fn resource(resource: EmbeddedResource) -> Content {
        Content::from(ContentBlock::resource(resource))
    }

    /// One resource link block.
    pub fn resource_link(uri: impl Into<String>, name: impl Into<String>) -> Content {
        Content::from(ContentBlock::resource_link(uri, name))
    }

    /// Appends a block.
    pub fn push(&mut self, block: ContentBlock) {
        self.blocks.push(block);
    }

    /// Appends a block (builder style).
    #[must_use]
    pub fn with(mut self, block: ContentBlock) -> Content {
        self.blocks.push(block);
        self
    }

    /// The blocks, in order.
    pub fn blocks(&self) -> &[ContentBlock] {
        &self.blocks
    }

    /// The blocks, by value.
    pub fn into_blocks(self) -> Vec<ContentBlock> {
        self.blocks
    }

    /// Whether there is no block.
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }
}

impl From<ContentBlock> for Content {
    fn from(block: ContentBlock) -> Content {
        Content { blocks: vec![block] }
    }
}

impl From<Vec<ContentBlock>> for Content {
    fn from(blocks: Vec<ContentBlock>) -> Content {
        Content { blocks }
    }
}

impl FromIterator<ContentBlock> for Content {
    fn from_iter<I: IntoIterator<Item = ContentBlock>>(iter: I) -> Content {
        Content::from_blocks(iter)
    }
}

impl IntoIterator for Content {
    type Item = ContentBlock;
    type IntoIter = std::vec::IntoIter<ContentBlock>;
    fn into_iter(self) -> Self::IntoIter {
        self.blocks.into_iter()
    }
}

/// The schema of one block kind: an object with a `type` constant and the required fields.
fn block_schema(kind: &str, properties: Value, required: &[&str]) -> Value {
    let mut props = Map::new();
    props.insert("type".to_owned(), json!({ "const": kind }));
    if let Value::Object(p) = properties {
        props.extend(p);
    }
    let mut req = vec![Value::String("type".to_owned())];
    req.extend(required.iter().map(|r| Value::String((*r).to_owned())));
    json!({ "type": "object", "properties": props, "required": req })
}

/// The schema of [`Content`]: an array of blocks, marked with `x-keel-content`. Blocks stay open to the extra
/// fields MCP allows (`annotations`, `_meta`); an embedded resource has text or a blob.
pub fn content_schema() -> Value {
    let string = json!({ "type": "string" });
    let resource = json!({
        "type": "object",
        "properties": {
            "uri": string, "mimeType": string, "text": string, "blob": string,
        },
        "required": ["uri"],
        "anyOf": [{ "required": ["text"] }, { "required": ["blob"] }],
    });
    let blocks = vec![
        block_schema("text", json!({ "text": string }), &["text"]),
        block_schema("image", json!({ "data": string, "mimeType": string }), &["data", "mimeType"]),
        block_schema("audio", json!({ "data": string, "mimeType": string }), &["data", "mimeType"]),
        block_schema("resource", json!({ "resource": resource }), &["resource"]),
        block_schema(
            "resource_link",
            json!({ "uri": string, "name": string, "description": string, "mimeType": string }),
            &["uri", "name"],
        ),
    ];
    json!({
        "title": "Content",
        "description": "MCP content blocks: text, image, audio, embedded resources and resource links",
        "type": "array",
        "items": { "oneOf": blocks },
        CONTENT_MARKER: true,
    })
}

impl JsonSchema for Content {
    fn inline_schema() -> bool {
        true
    }

    fn schema_name() -> Cow<'static, str> {
        Cow::Borrowed("Content")
    }

    fn schema_id() -> Cow<'static, str> {
        Cow::Borrowed("keel_tools_core::content::Content")
    }

    fn json_schema(_generator: &mut SchemaGenerator) -> Schema {
        match content_schema() {
            Value::Object(map) => Schema::from(map),
            // `content_schema` always builds an object; a `true` schema is the harmless fallback.
            _ => Schema::from(true),
        }
    }
}

const BASE64_ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 (RFC 4648, with padding) of `bytes`.
fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], chunk.get(1).copied().unwrap_or(0), chunk.get(2).copied().unwrap_or(0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        let sextet = |shift: u32| char::from(BASE64_ALPHABET[((n >> shift) & 0x3f) as usize]);
        out.push(sextet(18));
        out.push(sextet(12));
        out.push(if chunk.len() > 1 { sextet(6) } else { '=' });
        out.push(if chunk.len() > 2 { sextet(0) } else { '=' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_matches_rfc4648_vectors() {
        let cases =
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("fooba", "Zm9vYmE=")];
        for (plain, encoded) in cases {
            assert_eq!(base64_encode(plain.as_bytes()), encoded);
        }
        assert_eq!(base64_encode(&[0xff, 0xfe, 0xfd]), "//79");
    }

    #[test]
    fn serializes_as_mcp_blocks() {
        let c = Content::text("hi")
            .with(ContentBlock::image("AAAA", "image/png"))
            .with(ContentBlock::audio("BBBB", "audio/wav"))
            .with(ContentBlock::resource(EmbeddedResource::text("test://r", "text/plain", "body")))
            .with(ContentBlock::resource(EmbeddedResource::blob("test://b", "application/octet-stream", "CCCC")))
            .with(ContentBlock::resource_link("test://l", "link"));
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(
            v,
            json!([
                {"type": "text", "text": "hi"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"},
                {"type": "audio", "data": "BBBB", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "test://r", "mimeType": "text/plain", "text": "body"}},
                {"type": "resource", "resource": {"uri": "test://b", "mimeType": "application/octet-stream", "blob": "CCCC"}},
                {"type": "resource_link", "uri": "test://l", "name": "link"},
            ])
        );
        let back: Content = serde_json::from_value(v).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.blocks().iter().map(ContentBlock::kind).collect::<Vec<_>>().len(), 6);
    }

    #[test]
    fn schema_is_marked_and_validates_the_serialized_form() {
        let schema = crate::__private::schema_for::<Content>();
        assert!(is_content_schema(&schema));
        assert_eq!(schema["type"], "array");
        let validator = jsonschema::validator_for(&schema).unwrap();
        let c = Content::text("a")
            .with(ContentBlock::image_bytes(&[1, 2, 3], "image/png"))
            .with(ContentBlock::resource(EmbeddedResource::blob_bytes("x://y", "application/gzip", &[9])))
            .with(ContentBlock::resource_link("x://z", "z"));
        assert!(validator.is_valid(&serde_json::to_value(&c).unwrap()));
        assert!(!validator.is_valid(&json!([{"type": "image", "data": "AAAA"}])));
        assert!(!validator.is_valid(&json!([{"type": "resource", "resource": {"uri": "x://y"}}])));
        assert!(!validator.is_valid(&json!({"type": "text", "text": "not an array"})));
        assert!(!is_content_schema(&json!({"type": "object"})));
    }
}
