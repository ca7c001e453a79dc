//! The public behaviour of `SearchIndex`: ranking, regex search, edge cases, embeddings, and no panics.

use keel_tools_search::{Document, Embedder, MAX_PATTERN_LEN, SearchError, SearchIndex};
use serde_json::json;

fn names<'a>(hits: &[keel_tools_search::Hit<'a>]) -> Vec<&'a str> {
    hits.iter().map(|h| h.name()).collect()
}

fn catalogue() -> SearchIndex {
    SearchIndex::build([
        Document::from_schema(
            "billing.invoice.refund",
            "Refund an invoice, fully or in part, to the original payment method.",
            &json!({
                "type": "object",
                "properties": {
                    "invoice_id": {"type": "string", "description": "The invoice to refund."},
                    "amount_cents": {"type": "integer", "description": "How much; the whole invoice if absent."}
                }
            }),
        ),
        Document::from_schema(
            "billing.invoice.send",
            "Email an invoice to the customer.",
            &json!({"properties": {"cc": {"type": "array", "items": {"type": "string", "format": "email"}}}}),
        ),
        Document::from_schema(
            "incident.lookup",
            "Look up an incident.",
            &json!({
                "properties": {
                    "id": {"type": "string", "description": "The incident's id, e.g. INC-1234."},
                    "include_timeline": {"type": "boolean", "description": "Also return the paging history."}
                }
            }),
        ),
        Document::new("deploy.rollback", "Roll a service back to its previous release.")
            .with_param("service", "The service, e.g. checkout-api.")
            .with_param("reason", "Why, for the audit log; mention the incident if there is one."),
        Document::new("geo.timezone", "The time zone of a place.").with_param("coordinates", "Latitude, longitude."),
        Document::new("list.all", "Every item."),
    ])
}

#[test]
fn a_parameters_docs_find_the_tool() {
    let index = catalogue();
    assert_eq!(names(&index.search("paging history", 5)), ["incident.lookup"]);
    assert_eq!(index.search("latitude", 5)[0].name(), "geo.timezone");
    assert_eq!(index.search("audit log", 5)[0].name(), "deploy.rollback");
}

#[test]
fn a_name_beats_a_description_and_a_parameter() {
    let index = catalogue();
    // "incident" is in incident.lookup's name and in deploy.rollback's parameter docs.
    let hits = index.search("incident", 5);
    assert_eq!(names(&hits), ["incident.lookup", "deploy.rollback"]);
    assert!(hits[0].score() > hits[1].score());
    // "invoice" is in both billing.invoice.* names; both come before anything else.
    let hits = index.search("invoice", 5);
    assert_eq!(names(&hits)[..2], ["billing.invoice.refund", "billing.invoice.send"]);

    // The same word in one tool's name and in another's description, nothing else around it.
    let index = SearchIndex::build([
        Document::new("tool.alpha", "Handles the refund of an order."),
        Document::new("orders.refund", "Handles an order."),
    ]);
    assert_eq!(names(&index.search("refund", 5)), ["orders.refund", "tool.alpha"]);
}

#[test]
fn stemming_relates_inflections() {
    let index = catalogue();
    for q in ["refunds", "refunded", "refunding", "REFUND"] {
        assert_eq!(index.search(q, 5)[0].name(), "billing.invoice.refund", "{q}");
    }
    assert_eq!(index.search("emails invoices", 5)[0].name(), "billing.invoice.send");
    assert_eq!(index.search("rolling back releases", 5)[0].name(), "deploy.rollback");
}

#[test]
fn an_exact_name_comes_first() {
    // Every other tool says "send" and "invoice" more often than the one named so.
    let mut docs: Vec<Document> = (0..20)
        .map(|i| Document::new(format!("mail.t{i}"), "Send the invoice, send the invoice, send the invoice."))
        .collect();
    docs.push(Document::new("invoice.send", "Deliver a bill."));
    let index = SearchIndex::build(docs);
    for q in ["invoice.send", "  Invoice.Send ", "invoice-send"] {
        let hits = index.search(q, 3);
        assert_eq!(hits[0].name(), "invoice.send", "{q:?}");
        assert!(hits[0].score() > hits[1].score());
    }
    // A name that shares no word with the query's analysis (only stopwords) is still found exactly.
    let index = SearchIndex::build([Document::new("the", "An article."), Document::new("x", "The x.")]);
    assert_eq!(index.search("the", 5)[0].name(), "the");
}

#[test]
fn stopwords_are_dropped_unless_alone() {
    let index = catalogue();
    // "how", "do", "i", "an", "the" match descriptions, but are dropped.
    assert_eq!(names(&index.search("how do I look up the incident", 5))[0], "incident.lookup");
    let hits = index.search("how do I frobnicate", 5);
    assert!(hits.is_empty(), "{hits:?}");
    // A query of stopwords alone keeps them: "all" is one.
    assert_eq!(index.search("all", 5)[0].name(), "list.all");
}

#[test]
fn ties_are_ordered_by_name_then_index() {
    let docs = ["c.tool", "a.tool", "b.tool", "a.tool"].map(|n| Document::new(n, "Same words."));
    let index = SearchIndex::build(docs);
    let hits = index.search("same words", 10);
    let order: Vec<(&str, usize)> = hits.iter().map(|h| (h.name(), h.index())).collect();
    assert_eq!(order, [("a.tool", 1), ("a.tool", 3), ("b.tool", 2), ("c.tool", 0)]);
    assert!(hits.windows(2).all(|w| w[0].score() == w[1].score()));
    // The same with a limit that cuts through the ties.
    let hits = index.search("same words", 2);
    assert_eq!(hits.iter().map(|h| h.index()).collect::<Vec<_>>(), [1, 3]);
}

#[test]
fn limits_and_empty_inputs() {
    let index = catalogue();
    assert!(index.search("invoice", 0).is_empty());
    assert!(index.search("", 5).is_empty());
    assert!(index.search(" \t\n", 5).is_empty());
    assert!(index.search("...---!!!", 5).is_empty());
    assert_eq!(index.search("invoice", 1).len(), 1);
    assert_eq!(index.search("invoice", usize::MAX).len(), 2);

    let empty = SearchIndex::build([]);
    assert!(empty.is_empty());
    assert_eq!(empty.len(), 0);
    assert!(empty.search("anything", 10).is_empty());
    assert!(empty.search_regex(".*", 10).unwrap().is_empty());

    let blank = SearchIndex::build([Document::default(), Document::new("", "")]);
    assert!(blank.search("x", 10).is_empty());
    assert!(blank.search_regex(".*", 10).unwrap().is_empty());
}

#[test]
fn regex_search() {
    let index = catalogue();
    assert_eq!(
        names(&index.search_regex(r"^billing\.", 10).unwrap()),
        ["billing.invoice.refund", "billing.invoice.send"]
    );
    // Case-sensitive unless (?i).
    assert!(index.search_regex("INCIDENT", 10).unwrap().is_empty());
    // The name first, then the one mentioning it in a parameter's docs.
    assert_eq!(names(&index.search_regex("(?i)INCIDENT", 10).unwrap()), ["incident.lookup", "deploy.rollback"]);
    // A parameter's name.
    assert_eq!(names(&index.search_regex("^amount_", 10).unwrap()), ["billing.invoice.refund"]);
    // Python's \Z, named groups, lazy and counted repetition.
    assert_eq!(names(&index.search_regex(r"(?P<w>release)\.\Z", 10).unwrap()), ["deploy.rollback"]);
    assert_eq!(names(&index.search_regex(r"INC-\d{2,}?", 10).unwrap()), ["incident.lookup"]);
    assert_eq!(index.search_regex("e", 2).unwrap().len(), 2);
    assert!(index.search_regex("e", 0).unwrap().is_empty());
}

#[test]
fn regex_errors() {
    let index = catalogue();
    for bad in ["(unclosed", "[z-a]", "*", r"(?<=a)b", r"(a)\1", "(?P<x>a)(?P=x)", r"\p{NoSuchClass}"] {
        match index.search_regex(bad, 5) {
            Err(SearchError::InvalidPattern { message }) => assert!(!message.is_empty(), "{bad}"),
            other => panic!("{bad}: {other:?}"),
        }
    }
    // A bad pattern is reported even with a limit of 0.
    assert!(index.search_regex("(", 0).is_err());

    let at_limit = "a".repeat(MAX_PATTERN_LEN);
    assert!(index.search_regex(&at_limit, 5).unwrap().is_empty());
    let over = "é".repeat(MAX_PATTERN_LEN + 1);
    assert_eq!(index.search_regex(&over, 5), Err(SearchError::PatternTooLong { len: 201, max: 200 }));

    let err = index.search_regex(r"\w{200}{200}", 5).unwrap_err();
    assert!(matches!(err, SearchError::PatternTooComplex { .. }), "{err:?}");
    assert!(err.to_string().contains("too complex"), "{err}");

    let deep = format!("{}a{}", "(".repeat(90), ")".repeat(90));
    assert!(matches!(index.search_regex(&deep, 5), Err(SearchError::InvalidPattern { .. })));
}

#[test]
fn unicode_input() {
    let index = SearchIndex::build([
        Document::new("météo.prévision", "Prévisions météo pour une ville. 天気予報"),
        Document::new("straße.suchen", "Sucht eine Straße — İstanbul, ǅemal, ﬃ."),
        Document::new("emoji.react", "React with 👍 or 🎉."),
    ]);
    assert_eq!(index.search("MÉTÉO", 5)[0].name(), "météo.prévision");
    assert_eq!(index.search("天気予報", 5)[0].name(), "météo.prévision");
    assert_eq!(index.search("STRASSE straße", 5)[0].name(), "straße.suchen");
    assert!(index.search("👍", 5).is_empty());
    assert_eq!(index.search_regex("👍", 5).unwrap()[0].name(), "emoji.react");
    assert_eq!(index.search_regex(r"(?i)^MÉTÉO\b", 5).unwrap()[0].name(), "météo.prévision");
    for q in ["İ", "ǅ", "ﬃ", "\u{0}", "\u{FEFF}", "a\u{301}", "\u{10FFFF}"] {
        let _ = index.search(q, 5);
        let _ = index.search_regex(q, 5);
    }
}

/// Four topics; each dimension counts the words of one.
struct Topics;

impl Embedder for Topics {
    fn embed(&self, text: &str) -> Vec<f32> {
        let text = text.to_lowercase();
        let count = |words: &[&str]| words.iter().filter(|w| text.contains(*w)).count() as f32;
        vec![
            count(&["money", "invoice", "refund", "pay", "cash"]),
            count(&["outage", "incident", "broken", "paging"]),
            count(&["map", "place", "where", "time zone"]),
            count(&["deploy", "release", "service", "roll"]),
        ]
    }
}

#[test]
fn embeddings_are_fused_with_bm25() {
    let docs = || catalogue().documents().to_vec();
    let index = SearchIndex::with_embedder(docs(), Topics).unwrap();
    // No word in common with any document: the embedding alone finds it.
    assert_eq!(index.search("pay me the cash", 3)[0].name(), "billing.invoice.refund");
    assert_eq!(index.search("something is broken", 3)[0].name(), "incident.lookup");
    // Words and meaning agree.
    assert_eq!(index.search("refund money", 3)[0].name(), "billing.invoice.refund");
    // The exact name still comes first.
    assert_eq!(index.search("geo.timezone", 3)[0].name(), "geo.timezone");
    // Without an embedder, the first query finds nothing.
    assert!(catalogue().search("pay me the cash", 3).is_empty());
    // The fused scores are ordered.
    let hits = index.search("invoice refund incident", 10);
    assert!(hits.windows(2).all(|w| w[0].score() >= w[1].score()));
}

struct Fixed(Vec<f32>);

impl Embedder for Fixed {
    fn embed(&self, text: &str) -> Vec<f32> {
        if text.starts_with("query") { self.0.clone() } else { vec![1.0, 0.0] }
    }
}

#[test]
fn unusable_embeddings_are_errors() {
    let docs = || [Document::new("a.tool", "First."), Document::new("b.tool", "Second.")];

    // A query vector of another dimension: search keeps BM25F, try_search says why.
    let index = SearchIndex::with_embedder(docs(), Fixed(vec![1.0, 0.0, 0.0])).unwrap();
    assert_eq!(names(&index.search("query first", 5)), ["a.tool"]);
    assert_eq!(
        index.try_search("query first", 5),
        Err(SearchError::DimensionMismatch { expected: 2, found: 3, document: None })
    );
    let index = SearchIndex::with_embedder(docs(), Fixed(vec![f32::NAN, 0.0])).unwrap();
    assert_eq!(names(&index.search("query first", 5)), ["a.tool"]);
    assert!(matches!(index.try_search("query first", 5), Err(SearchError::InvalidEmbedding { document: None, .. })));
    // A zero vector is usable: it is similar to nothing.
    let index = SearchIndex::with_embedder(docs(), Fixed(vec![0.0, 0.0])).unwrap();
    assert_eq!(names(&index.try_search("query first", 5).unwrap()), ["a.tool"]);
    // Huge values are normalised without overflow.
    let index = SearchIndex::with_embedder(docs(), Fixed(vec![f32::MAX, f32::MAX])).unwrap();
    assert_eq!(index.try_search("query", 5).unwrap().len(), 2);

    // Documents whose vectors differ.
    struct ByLength;
    impl Embedder for ByLength {
        fn embed(&self, text: &str) -> Vec<f32> {
            // "a: " has 3 characters, "bb: " 4.
            vec![1.0; text.len() % 3 + 1]
        }
    }
    let err = SearchIndex::with_embedder([Document::new("a", ""), Document::new("bb", "")], ByLength).unwrap_err();
    assert_eq!(err, SearchError::DimensionMismatch { expected: 1, found: 2, document: Some("bb".into()) });
    assert!(err.to_string().contains("\"bb\""), "{err}");
    struct Empty;
    impl Embedder for Empty {
        fn embed(&self, _: &str) -> Vec<f32> {
            Vec::new()
        }
    }
    assert!(matches!(
        SearchIndex::with_embedder(docs(), Empty),
        Err(SearchError::InvalidEmbedding { document: Some(_), .. })
    ));
    // No documents: nothing to embed, nothing to find.
    let index = SearchIndex::with_embedder([], Empty).unwrap();
    assert!(index.try_search("query", 5).unwrap().is_empty());
}

#[test]
fn the_index_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<SearchIndex>();
    let index = std::sync::Arc::new(catalogue());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let index = index.clone();
            std::thread::spawn(move || index.search("invoice", 1)[0].index())
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), 0);
    }
}

/// xorshift64*: a small deterministic generator, so failures replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// A string of up to `max` characters, mostly from alphabets that exercise the analysis and regex syntax.
    fn string(&mut self, max: usize) -> String {
        const PIECES: &[&str] = &[
            "a", "e", "s", "ing", "ed", "ies", "X", "Y", "Z", "0", "9", ".", "_", "-", " ", "\\", "(", ")", "[", "]",
            "{", "}", "*", "+", "?", "|", "^", "$", "\\Z", "\\b", "(?i)", "(?P<n>", "{2,}", "é", "İ", "ß", "ﬃ", "天",
            "👍", "\u{301}", "\u{0}", "invoice", "refund", "the", "how",
        ];
        let len = self.below(max + 1);
        let mut s = String::new();
        for _ in 0..len {
            if self.below(8) == 0 {
                // Any scalar value.
                let c = char::from_u32(self.next() as u32 % 0x11_0000).unwrap_or('\u{FFFD}');
                s.push(c);
            } else {
                s.push_str(PIECES[self.below(PIECES.len())]);
            }
        }
        s
    }

    fn value(&mut self, depth: usize) -> serde_json::Value {
        use serde_json::Value;
        const KEYS: &[&str] = &[
            "properties",
            "items",
            "anyOf",
            "oneOf",
            "allOf",
            "$ref",
            "description",
            "title",
            "enum",
            "const",
            "$defs",
            "definitions",
            "additionalProperties",
            "prefixItems",
            "patternProperties",
            "p",
            "q",
        ];
        match if depth == 0 { self.below(4) } else { self.below(7) } {
            0 => Value::Null,
            1 => Value::Bool(self.below(2) == 0),
            2 => Value::String(if self.below(2) == 0 {
                format!("#/$defs/{}", KEYS[self.below(KEYS.len())])
            } else {
                self.string(6)
            }),
            3 => json!(self.next() as i64),
            4 | 5 => Value::Object(
                (0..self.below(5)).map(|_| (KEYS[self.below(KEYS.len())].to_owned(), self.value(depth - 1))).collect(),
            ),
            _ => Value::Array((0..self.below(4)).map(|_| self.value(depth - 1)).collect()),
        }
    }
}

#[test]
fn never_panics_on_random_input() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let docs: Vec<Document> = (0..300)
        .map(|_| {
            let schema = rng.value(6);
            let name = rng.string(8);
            let description = rng.string(20);
            Document::from_schema(name, description, &schema).with_param(rng.string(4), rng.string(10))
        })
        .collect();
    let plain = SearchIndex::build(docs.clone());
    let fused = SearchIndex::with_embedder(docs, Topics).unwrap();
    for i in 0..3_000 {
        let q = rng.string(12);
        let limit = rng.below(20);
        for index in [&plain, &fused] {
            let hits = index.search(&q, limit);
            assert!(hits.len() <= limit);
            assert!(hits.iter().all(|h| h.score() > 0.0 && h.score().is_finite()), "{q:?}: {hits:?}");
            assert!(hits.windows(2).all(|w| w[0].score() >= w[1].score()), "{q:?}: {hits:?}");
            assert!(index.try_search(&q, limit).is_ok());
        }
        if i % 3 == 0 {
            // The regex engine: errors are values, hits are ordered.
            if let Ok(hits) = plain.search_regex(&q, limit) {
                assert!(hits.len() <= limit);
                assert!(hits.windows(2).all(|w| w[0].score() >= w[1].score()));
            }
        }
    }
}
