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
mod query;

pub use document::Document;
pub use index::{MAX_PATTERN_LEN, MAX_PATTERN_SIZE, MAX_QUERY_TERMS, SearchIndex};
pub use query::{Embedder, Hit, SearchError};
