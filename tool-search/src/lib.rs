//! Search over a large set of tools, for deferred tool loading.
//!
//! With hundreds or thousands of tools, sending every definition to a model on every turn costs tokens and
//! accuracy. Instead, most tools can be *deferred*: kept out of the model's list until a search surfaces them.
//! This crate is that search. It indexes, for each tool, a [`Document`]: the tool's name, its description and its
//! parameters' names and docs (read from its input schema by [`Document::from_schema`]). A [`SearchIndex`] is
//! built once from the documents, is immutable and `Send + Sync`, and answers three kinds of query:
//!
//! - [`SearchIndex::search`]: words, ranked by BM25F (below); a query equal to a tool's name puts that tool first;
//! - [`SearchIndex::search_regex`]: a regular expression over the same texts, as Anthropic's regex tool search
//!   does it;
//! - with [`SearchIndex::with_embedder`], [`search`](SearchIndex::search) also ranks by the cosine similarity of
//!   embeddings from an [`Embedder`] of your choosing, and fuses the two rankings.
//!
//! It depends on `serde_json` (for schemas) and `regex`, and panics on no input: errors are [`SearchError`]
//! values.
//!
//! ```
//! use keel_tools_search::{Document, SearchIndex};
//! use serde_json::json;
//!
//! let tools = [
//!     Document::from_schema(
//!         "billing.invoice.refund",
//!         "Refund an invoice, fully or in part.",
//!         &json!({
//!             "type": "object",
//!             "properties": {
//!                 "invoice_id": {"type": "string", "description": "The invoice to refund."},
//!                 "amount_cents": {"type": "integer", "description": "How much; the whole invoice if absent."}
//!             },
//!             "required": ["invoice_id"]
//!         }),
//!     ),
//!     Document::from_schema(
//!         "incident.lookup",
//!         "Look up an incident.",
//!         &json!({
//!             "type": "object",
//!             "properties": {
//!                 "id": {"type": "string", "description": "The incident's id, e.g. INC-1234."},
//!                 "severity": {"enum": ["low", "medium", "high"], "description": "Only incidents this bad."}
//!             }
//!         }),
//!     ),
//!     Document::new("billing.customer.update", "Change a customer's email or address."),
//! ];
//! let index = SearchIndex::build(tools);
//!
//! // Words: "refunds" meets "refund" after stemming; "how" and "do" are dropped.
//! let hits = index.search("how do I refund invoices?", 3);
//! assert_eq!(hits[0].name(), "billing.invoice.refund");
//!
//! // A parameter's docs and enum values are searched too.
//! assert_eq!(index.search("high severity", 3)[0].name(), "incident.lookup");
//!
//! // The exact name (or its wire form) comes first.
//! assert_eq!(index.search("incident-lookup", 3)[0].name(), "incident.lookup");
//!
//! // A regular expression, case-sensitive unless it says (?i).
//! let hits = index.search_regex(r"(?i)^billing\.", 10)?;
//! assert_eq!(hits.len(), 2);
//!
//! // A bad pattern is an error, not a panic.
//! assert!(index.search_regex("(unclosed", 10).is_err());
//! # Ok::<(), keel_tools_search::SearchError>(())
//! ```
//!
//! # Ranking
//!
//! Text is analysed the same way in documents and queries:
//!
//! 1. It is split into words at every character that is not alphanumeric (`.`, `_`, `-`, spaces, punctuation)
//!    and at camelCase boundaries: `billing.invoice_refund`, `billingInvoiceRefund` and `billing-invoice-refund`
//!    all give `billing`, `invoice`, `refund`; `HTTPServer` gives `http`, `server`.
//! 2. Words are lowercased (Unicode lowercase).
//! 3. ASCII words longer than three letters are stemmed by a few suffix rules, applied once each in this order:
//!    plurals (`-ies` to `-y`, `-sses` to `-ss`, `-xes`/`-ches`/`-shes`/`-zes` lose `-es`, otherwise a final
//!    `-s` goes unless after `s`, `u` or `i`), then tenses (`-ied` to `-y`; `-ing` and `-ed` go if a vowel stays
//!    before them, and a doubled consonant left behind, other than `l`, `s`, `z`, is undoubled), then a final
//!    `-e` if more than three letters remain. So `refund`, `refunds`, `refunded` and `refunding` are one term,
//!    as are `create`, `creates`, `created`, `creating`. Irregular forms (`ran`, `children`) are not related, and
//!    words that are not ASCII are only lowercased.
//!
//! In a query, common English words (`a`, `the`, `how`, `do`, `for`, `please`, `tool`, ...) are dropped when
//! the query holds any other word.
//!
//! Documents are scored by BM25F with four fields, each weighted and length-normalised on its own: the name
//! (weight 4), the description (2), the parameter names (1.5) and the parameter docs (1), with `k1 = 1.2`. A
//! word in a tool's name therefore counts for more than the same word in its description, and so on. Each
//! document's score for each term is computed when the index is built, so a query only adds up precomputed
//! numbers from the inverted lists of its terms.
//!
//! # Cost
//!
//! Building analyses each document once and precomputes each document's score for each of its terms, so a query
//! only adds up numbers from the inverted lists of its terms, then keeps the best `limit`: its cost is about the
//! total length of those lists. Over 10,000 generated tools (the `search` benchmark of the workspace's `bench`
//! package), building takes under 100 ms, a median query under 10 µs and the slowest query of the set under
//! 30 µs at its median. A regex query runs the pattern once over all the documents' texts (and again on the few
//! texts where a match needs checking), in time linear in their length: under 2 ms for 10,000 tools.
//! With an embedder, each query also costs one call to it and one dot product per document.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod analyze;
mod document;
mod index;

use std::fmt;
use std::sync::Arc;

pub use document::Document;
pub use index::{MAX_PATTERN_LEN, MAX_PATTERN_SIZE, MAX_QUERY_TERMS, SearchIndex};

/// One result of a search: which document, and how well it matched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit<'a> {
    name: &'a str,
    index: usize,
    score: f32,
}

impl<'a> Hit<'a> {
    /// The document's name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The document's place in the documents the index was built from ([`SearchIndex::documents`]).
    pub fn index(&self) -> usize {
        self.index
    }

    /// How well the document matched: positive, higher is better. Scores compare only within one result list.
    pub fn score(&self) -> f32 {
        self.score
    }
}

/// Turns text into a vector, for search by meaning ([`SearchIndex::with_embedder`]).
///
/// Every document and every query is embedded with the same embedder, and vectors are compared by cosine
/// similarity, so their length does not matter, only their direction. Every vector must have the same number of
/// dimensions, at least one, and no NaN or infinity; the index reports a vector that breaks this as a
/// [`SearchError`].
pub trait Embedder: Send + Sync {
    /// The vector of `text`.
    fn embed(&self, text: &str) -> Vec<f32>;
}

impl<E: Embedder + ?Sized> Embedder for &E {
    fn embed(&self, text: &str) -> Vec<f32> {
        (**self).embed(text)
    }
}

impl<E: Embedder + ?Sized> Embedder for Box<E> {
    fn embed(&self, text: &str) -> Vec<f32> {
        (**self).embed(text)
    }
}

impl<E: Embedder + ?Sized> Embedder for Arc<E> {
    fn embed(&self, text: &str) -> Vec<f32> {
        (**self).embed(text)
    }
}

/// Why a search, or building an index with an embedder, failed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SearchError {
    /// The regex pattern is longer than [`MAX_PATTERN_LEN`] characters.
    PatternTooLong {
        /// Its length, in characters.
        len: usize,
        /// The longest allowed.
        max: usize,
    },
    /// The regex pattern does not parse, or uses what is not supported (look-arounds, backreferences).
    InvalidPattern {
        /// The parser's explanation, which shows where the pattern went wrong.
        message: String,
    },
    /// The regex pattern would compile to more than [`MAX_PATTERN_SIZE`] bytes (large counted repetitions).
    PatternTooComplex {
        /// The limit, in bytes.
        limit: usize,
    },
    /// An embedding has another number of dimensions than the ones before it.
    DimensionMismatch {
        /// The dimensions of the first document's vector.
        expected: usize,
        /// The dimensions of this one.
        found: usize,
        /// The document whose vector it is; `None` for a query's.
        document: Option<String>,
    },
    /// An embedding is empty, or holds a NaN or an infinity.
    InvalidEmbedding {
        /// What is wrong with it.
        reason: &'static str,
        /// The document whose vector it is; `None` for a query's.
        document: Option<String>,
    },
}

impl fmt::Display for SearchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let whose = |document: &Option<String>| match document {
            Some(name) => format!("the embedding of document {name:?}"),
            None => "the query's embedding".to_owned(),
        };
        match self {
            SearchError::PatternTooLong { len, max } => {
                write!(f, "the pattern is {len} characters long; the limit is {max}")
            }
            SearchError::InvalidPattern { message } => write!(f, "invalid pattern: {message}"),
            SearchError::PatternTooComplex { limit } => write!(
                f,
                "the pattern is too complex: compiled, it would exceed {limit} bytes (use smaller counted repetitions)"
            ),
            SearchError::DimensionMismatch { expected, found, document } => {
                write!(f, "{} has {found} dimensions, not {expected} like the others", whose(document))
            }
            SearchError::InvalidEmbedding { reason, document } => {
                write!(f, "{} is unusable: {reason}", whose(document))
            }
        }
    }
}

impl std::error::Error for SearchError {}
