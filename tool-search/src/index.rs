//! The index and its queries.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::fmt;

use crate::analyze::{for_each_term, for_each_word, is_stopword, stem};
use crate::document::Document;
use crate::query::{Embedder, Hit, SearchError};

/// The fields of a document, in order of weight.
const NAME: usize = 0;
const DESCRIPTION: usize = 1;
const PARAM_NAMES: usize = 2;
const PARAM_DOCS: usize = 3;
const FIELDS: usize = 4;

/// BM25F: each field's weight (a term in the name counts 4 times one in a parameter's docs) ...
const WEIGHTS: [f32; FIELDS] = [4.0, 2.0, 1.5, 1.0];
/// ... and how much its length is normalised (0: not at all, 1: fully). Names are short and alike, so a long
/// name is barely penalised.
const LENGTH_NORM: [f32; FIELDS] = [0.3, 0.75, 0.5, 0.75];
/// BM25's term-frequency saturation.
const K1: f32 = 1.2;

/// The most distinct words of a query that count; the rest are ignored.
pub const MAX_QUERY_TERMS: usize = 32;

/// Reciprocal rank fusion's constant: a document at rank `r` (from 1) in a list adds `1 / (60 + r)`.
const RRF_K: f32 = 60.0;
/// How many of each ranked list take part in the fusion (or `limit`, if larger).
const FUSION_DEPTH: usize = 100;
/// Up to this many results are chosen in one pass over the candidates, beyond it by a selection.
const SMALL_K: usize = 128;

/// The longest pattern [`SearchIndex::search_regex`] accepts, in characters.
pub const MAX_PATTERN_LEN: usize = 200;
/// The most heap a compiled pattern may use, in bytes (its NFA, and separately its lazy DFA's cache).
pub const MAX_PATTERN_SIZE: usize = 2 << 20;
const PATTERN_NEST_LIMIT: u32 = 64;

/// Document ids are `u32`; documents past this many are not indexed.
const MAX_DOCS: usize = u32::MAX as usize;

#[derive(Debug, Clone, Copy)]
struct Posting {
    doc: u32,
    /// The document's whole BM25F score for the term: idf times the saturated, weighted, normalised frequency.
    impact: f32,
}

/// An immutable search index over a set of [`Document`]s: BM25F ranking ([`search`](Self::search)), regular
/// expressions ([`search_regex`](Self::search_regex)) and, when built [`with_embedder`](Self::with_embedder),
/// ranking fused with embedding similarity.
///
/// Built once, then shared: it is `Send + Sync`, and queries take `&self`.
///
/// ```
/// use keel_tools_search::{Document, SearchIndex};
///
/// let index = SearchIndex::build([
///     Document::new("billing.invoice.refund", "Refund an invoice, fully or in part."),
///     Document::new("billing.invoice.send", "Email an invoice to the customer."),
///     Document::new("incident.lookup", "Look up an incident by id."),
/// ]);
/// let hits = index.search("refunds", 10);
/// assert_eq!(hits.len(), 1);
/// assert_eq!(hits[0].name(), "billing.invoice.refund");
/// assert_eq!(hits[0].index(), 0);
/// ```
pub struct SearchIndex {
    docs: Vec<Document>,
    /// Each document's place in the order by name, then index: ties in score are broken by it.
    name_rank: Vec<u32>,
    terms: HashMap<Box<str>, u32>,
    /// The postings of term `t` are `postings[offsets[t]..offsets[t + 1]]`, by document.
    offsets: Vec<usize>,
    postings: Vec<Posting>,
    /// Each document's name, lowercased with `-` as `.`, and its index; sorted.
    exact: Vec<(Box<str>, u32)>,
    semantic: Option<Semantic>,
    /// Every text of every document (name, description, then each parameter's name and docs), each followed
    /// by `\n`, for regex search.
    haystack: String,
    /// Each text's place in `haystack` (where it starts; its `\n` is just before the next one's start), then
    /// the haystack's length.
    text_starts: Vec<usize>,
    /// Each text's document and field.
    text_owner: Vec<(u32, u8)>,
}

struct Semantic {
    embedder: Box<dyn Embedder>,
    /// The dimension of every vector; `None` when there are no documents.
    dim: Option<usize>,
    /// The documents' vectors, unit length (or all zeros), one after another.
    vectors: Vec<f32>,
}

impl fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SearchIndex")
            .field("documents", &self.docs.len())
            .field("terms", &self.terms.len())
            .field("postings", &self.postings.len())
            .field("embedding_dim", &self.semantic.as_ref().map(|s| s.dim))
            .finish()
    }
}

impl SearchIndex {
    /// Indexes `documents` for [`search`](Self::search) and [`search_regex`](Self::search_regex).
    ///
    /// Names need not be unique: documents are told apart by their index, their place in `documents`. Indexes
    /// are 32-bit: documents after the first `u32::MAX` are left out.
    pub fn build(documents: impl IntoIterator<Item = Document>) -> Self {
        let docs: Vec<Document> = documents.into_iter().take(MAX_DOCS).collect();
        Self::from_docs(docs, None)
    }

    /// Indexes `documents` as [`build`](Self::build) does, and embeds each with `embedder` (the text of
    /// [`Document::embedding_text`]); [`search`](Self::search) then embeds each query too and fuses the two
    /// rankings.
    ///
    /// # Errors
    ///
    /// [`SearchError::InvalidEmbedding`] if a vector is empty or holds a NaN or an infinity, and
    /// [`SearchError::DimensionMismatch`] if two documents' vectors differ in length. The error names the
    /// document.
    ///
    /// ```
    /// use keel_tools_search::{Document, Embedder, SearchIndex};
    ///
    /// /// A toy embedder: how often each of three topics' words appears.
    /// struct Topics;
    /// impl Embedder for Topics {
    ///     fn embed(&self, text: &str) -> Vec<f32> {
    ///         let text = text.to_lowercase();
    ///         let count = |words: &[&str]| words.iter().filter(|w| text.contains(*w)).count() as f32;
    ///         vec![count(&["money", "invoice", "refund", "pay"]), count(&["outage", "incident"]), count(&["user"])]
    ///     }
    /// }
    ///
    /// let index = SearchIndex::with_embedder(
    ///     [
    ///         Document::new("billing.invoice.refund", "Refund an invoice."),
    ///         Document::new("incident.lookup", "Look up an incident."),
    ///     ],
    ///     Topics,
    /// )?;
    /// // No word of the query is in a document, but its embedding is close to the refund tool's.
    /// let hits = index.search("give the money back", 1);
    /// assert_eq!(hits[0].name(), "billing.invoice.refund");
    /// # Ok::<(), keel_tools_search::SearchError>(())
    /// ```
    pub fn with_embedder(
        documents: impl IntoIterator<Item = Document>,
        embedder: impl Embedder + 'static,
    ) -> Result<Self, SearchError> {
        let docs: Vec<Document> = documents.into_iter().take(MAX_DOCS).collect();
        let mut dim = None;
        let mut vectors = Vec::new();
        for doc in &docs {
            let v = embedder.embed(&doc.embedding_text());
            check_vector(&v, dim, Some(doc.name()))?;
            dim = Some(v.len());
            push_unit(&mut vectors, &v);
        }
        Ok(Self::from_docs(docs, Some(Semantic { embedder: Box::new(embedder), dim, vectors })))
    }

    fn from_docs(docs: Vec<Document>, semantic: Option<Semantic>) -> Self {
        let mut order: Vec<u32> = (0..docs.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| docs[a as usize].name().cmp(docs[b as usize].name()).then(a.cmp(&b)));
        let mut name_rank = vec![0; docs.len()];
        for (rank, &d) in order.iter().enumerate() {
            name_rank[d as usize] = rank as u32;
        }
        let mut exact: Vec<(Box<str>, u32)> =
            docs.iter().enumerate().map(|(i, d)| (normalize_name(d.name()).into_boxed_str(), i as u32)).collect();
        exact.sort_unstable();
        let (terms, offsets, postings) = invert(&docs);
        let mut haystack = String::new();
        let mut text_starts = Vec::new();
        let mut text_owner = Vec::new();
        for (d, doc) in docs.iter().enumerate() {
            let params = doc.params().flat_map(|(n, p)| [(n, PARAM_NAMES), (p, PARAM_DOCS)]);
            for (text, field) in [(doc.name(), NAME), (doc.description(), DESCRIPTION)].into_iter().chain(params) {
                text_starts.push(haystack.len());
                text_owner.push((d as u32, field as u8));
                haystack.push_str(text);
                haystack.push('\n');
            }
        }
        text_starts.push(haystack.len());
        SearchIndex { docs, name_rank, terms, offsets, postings, exact, semantic, haystack, text_starts, text_owner }
    }

    /// The indexed documents, in the order given; a [`Hit::index`] is a place in this slice.
    pub fn documents(&self) -> &[Document] {
        &self.docs
    }

    /// How many documents are indexed.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// Whether no document is indexed.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The best `limit` documents for `query`, best first.
    ///
    /// The query is analysed as the documents are (split into words at non-alphanumerics and camelCase,
    /// lowercased, lightly stemmed; see the [crate docs](crate#ranking)), and common English words (`the`, `how`,
    /// `for`, ...) are dropped unless the query has nothing else. Only the first [`MAX_QUERY_TERMS`] distinct
    /// words count. Documents are ranked by BM25F over their fields: name, description, parameter names,
    /// parameter docs, in decreasing weight. A document that matches no word is not returned.
    ///
    /// A query equal to a document's name (ignoring case and surrounding space, with `-` and `.` alike, so the
    /// wire form `incident-lookup` finds `incident.lookup`) puts that document first.
    ///
    /// With an [embedder](Self::with_embedder), the query is embedded as well, and the BM25F ranking is fused
    /// with the ranking by cosine similarity (reciprocal rank fusion over the first 100 or `limit` of each,
    /// counting only documents of positive similarity). If the query's vector is unusable (another dimension, a
    /// NaN), the BM25F ranking is returned alone; [`try_search`](Self::try_search) reports it instead.
    ///
    /// Equal scores are ordered by name, then by index. Scores compare only within one result; with an
    /// embedder they are fusion scores, not BM25F. An empty query, or a `limit` of 0, returns nothing.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit<'_>> {
        self.run(query, limit, false).unwrap_or_default()
    }

    /// [`search`](Self::search), reporting an unusable query vector.
    ///
    /// # Errors
    ///
    /// [`SearchError::DimensionMismatch`] if the embedder gives the query a vector of another length than the
    /// documents', and [`SearchError::InvalidEmbedding`] if it holds a NaN or an infinity. Without an embedder,
    /// it never fails.
    pub fn try_search(&self, query: &str, limit: usize) -> Result<Vec<Hit<'_>>, SearchError> {
        self.run(query, limit, true)
    }

    fn run(&self, query: &str, limit: usize, strict: bool) -> Result<Vec<Hit<'_>>, SearchError> {
        if limit == 0 || query.trim().is_empty() || self.docs.is_empty() {
            return Ok(Vec::new());
        }
        let terms = self.query_terms(query);
        let mut best = match &self.semantic {
            None => self.lexical(&terms, limit),
            Some(semantic) => {
                let depth = limit.max(FUSION_DEPTH);
                let lexical = self.lexical(&terms, depth);
                match self.similar(semantic, query, depth) {
                    Ok(similar) => self.fuse(&lexical, &similar, limit),
                    Err(e) if strict => return Err(e),
                    Err(_) => lexical,
                }
            }
        };
        self.boost_exact(query, &mut best);
        Ok(self.hits(best, limit))
    }

    /// The distinct known terms of the query, stopwords dropped if anything else is there.
    fn query_terms(&self, query: &str) -> Vec<(u32, bool)> {
        let mut terms: Vec<(u32, bool)> = Vec::new();
        let mut words = 0;
        let mut content = false;
        let mut buf = String::new();
        for_each_word(query, &mut buf, |word| {
            if words == MAX_QUERY_TERMS {
                return;
            }
            let stop = is_stopword(word);
            stem(word);
            match self.terms.get(word.as_str()) {
                Some(&t) if !terms.iter().any(|&(u, _)| u == t) => {
                    words += 1;
                    content |= !stop;
                    terms.push((t, stop));
                }
                Some(_) => {}
                None => {
                    words += 1;
                    content |= !stop;
                }
            }
        });
        if content {
            terms.retain(|&(_, stop)| !stop);
        }
        terms
    }

    /// The best `k` documents matching a term, with their BM25F scores, best first.
    fn lexical(&self, terms: &[(u32, bool)], k: usize) -> Vec<(u32, f32)> {
        let postings = |t: u32| &self.postings[self.offsets[t as usize]..self.offsets[t as usize + 1]];
        match terms {
            [] => Vec::new(),
            [(t, _)] => self.select(postings(*t).iter().map(|p| (p.doc, p.impact)), k),
            _ => {
                // Impacts are positive, so a zero score means "not seen yet".
                let mut acc = vec![0f32; self.docs.len()];
                let mut touched = Vec::new();
                for &(t, _) in terms {
                    for p in postings(t) {
                        let s = &mut acc[p.doc as usize];
                        if *s == 0.0 {
                            touched.push(p.doc);
                        }
                        *s += p.impact;
                    }
                }
                self.select(touched.iter().map(|&d| (d, acc[d as usize])), k)
            }
        }
    }

    /// The best `k` documents of positive cosine similarity to the query, with it, best first.
    fn similar(&self, semantic: &Semantic, query: &str, k: usize) -> Result<Vec<(u32, f32)>, SearchError> {
        let v = semantic.embedder.embed(query);
        if let Some(dim) = semantic.dim
            && v.len() != dim
        {
            return Err(SearchError::DimensionMismatch { expected: dim, found: v.len(), document: None });
        }
        if v.iter().any(|x| !x.is_finite()) {
            return Err(SearchError::InvalidEmbedding { reason: "it holds a NaN or an infinity", document: None });
        }
        let Some(dim) = semantic.dim.filter(|&d| d > 0) else { return Ok(Vec::new()) };
        let mut q = Vec::with_capacity(dim);
        push_unit(&mut q, &v);
        let similar = semantic.vectors.chunks_exact(dim).enumerate().filter_map(|(i, d)| {
            let cos: f32 = d.iter().zip(&q).map(|(a, b)| a * b).sum();
            (cos > 0.0).then_some((i as u32, cos))
        });
        Ok(self.select(similar, k))
    }

    /// Reciprocal rank fusion of two ranked lists: the best `k`, best first.
    fn fuse(&self, lexical: &[(u32, f32)], similar: &[(u32, f32)], k: usize) -> Vec<(u32, f32)> {
        let rrf = |rank: usize| 1.0 / (RRF_K + 1.0 + rank as f32);
        let mut fused: Vec<(u32, f32)> = lexical
            .iter()
            .enumerate()
            .chain(similar.iter().enumerate())
            .map(|(rank, &(d, _))| (d, rrf(rank)))
            .collect();
        fused.sort_unstable_by_key(|&(d, _)| d);
        fused.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
        self.select(fused.into_iter(), k)
    }

    /// Puts the documents named exactly as the query above every other.
    fn boost_exact(&self, query: &str, cands: &mut Vec<(u32, f32)>) {
        let q = normalize_name(query.trim());
        let start = self.exact.partition_point(|(n, _)| **n < *q);
        let end = start + self.exact[start..].partition_point(|(n, _)| **n == *q);
        if start == end {
            return;
        }
        let top = cands.iter().map(|c| c.1).fold(0.0, f32::max) + 1.0;
        for &(_, d) in &self.exact[start..end] {
            match cands.iter_mut().find(|c| c.0 == d) {
                Some(c) => c.1 = top,
                None => cands.push((d, top)),
            }
        }
    }

    /// The order of results: score, then name, then index.
    fn cmp(&self, a: &(u32, f32), b: &(u32, f32)) -> Ordering {
        b.1.total_cmp(&a.1).then_with(|| self.name_rank[a.0 as usize].cmp(&self.name_rank[b.0 as usize]))
    }

    /// The best `k` candidates, best first. For a small `k`, one pass keeping them in a sorted array, where
    /// most candidates cost one comparison with the worst kept; otherwise a selection over all of them.
    fn select(&self, cands: impl Iterator<Item = (u32, f32)>, k: usize) -> Vec<(u32, f32)> {
        if k > SMALL_K {
            let mut all: Vec<(u32, f32)> = cands.collect();
            self.truncate_ranked(&mut all, k);
            return all;
        }
        let mut best: Vec<(u32, f32)> = Vec::with_capacity(k + 1);
        for c in cands {
            if best.len() == k && best.last().is_none_or(|worst| self.cmp(&c, worst) != Ordering::Less) {
                continue;
            }
            let at = best.partition_point(|b| self.cmp(b, &c) == Ordering::Less);
            best.insert(at, c);
            best.truncate(k);
        }
        best
    }

    /// Keeps the best `k` candidates, sorted.
    fn truncate_ranked(&self, cands: &mut Vec<(u32, f32)>, k: usize) {
        if k == 0 {
            cands.clear();
            return;
        }
        if cands.len() > k {
            cands.select_nth_unstable_by(k - 1, |a, b| self.cmp(a, b));
            cands.truncate(k);
        }
        cands.sort_unstable_by(|a, b| self.cmp(a, b));
    }

    fn hits(&self, mut cands: Vec<(u32, f32)>, limit: usize) -> Vec<Hit<'_>> {
        self.truncate_ranked(&mut cands, limit);
        cands
            .into_iter()
            .map(|(d, score)| Hit { name: self.docs[d as usize].name(), index: d as usize, score })
            .collect()
    }

    /// The best `limit` documents whose name, description, a parameter's name or a parameter's docs match the
    /// regular expression `pattern`, best first.
    ///
    /// This is the search of Anthropic's regex tool search (`tool_search_tool_regex`): the pattern is searched
    /// for (not anchored) in each of those texts separately, and is case-sensitive unless it says `(?i)`.
    /// A document's score is the sum of the weights of the fields where it matches (name 4, description 2,
    /// parameter names 1.5, parameter docs 1); equal scores are ordered by name, then by index.
    ///
    /// The syntax is that of the [`regex`](https://docs.rs/regex) crate, which for common patterns is Python's
    /// `re`: classes, `\d \w \s \b`, `(?i)` and the other inline flags, `(?P<name>...)` groups, lazy and counted
    /// repetition. It differs where Python's engine backtracks: there are no look-arounds (`(?=`, `(?!`,
    /// `(?<=`, `(?<!`), backreferences (`\1`, `(?P=name)`), conditionals or atomic groups, and such a pattern is
    /// an [`InvalidPattern`](SearchError::InvalidPattern) error. In exchange, matching takes time linear in the
    /// text, whatever the pattern. Python's `\Z` (end of text) is accepted and read as `\z`; `$` holds only at the
    /// end of a text, where Python's also holds before a final newline. As in Python on text, `\d`, `\w`, `\s`
    /// and case-insensitive matching follow Unicode.
    ///
    /// # Errors
    ///
    /// [`SearchError::PatternTooLong`] beyond [`MAX_PATTERN_LEN`] characters,
    /// [`SearchError::InvalidPattern`] for a syntax error (with the parser's message), and
    /// [`SearchError::PatternTooComplex`] if the compiled pattern would need more than [`MAX_PATTERN_SIZE`]
    /// bytes (`\w{100}{100}`). A `limit` of 0 returns nothing, but the pattern is checked first.
    ///
    /// ```
    /// use keel_tools_search::{Document, SearchError, SearchIndex};
    ///
    /// let index = SearchIndex::build([
    ///     Document::new("billing.invoice.refund", "Refund an invoice."),
    ///     Document::new("incident.lookup", "Look up an incident.").with_param("id", "Incident id."),
    /// ]);
    /// let hits = index.search_regex(r"(?i)^incident\b", 5)?;
    /// assert_eq!(hits[0].name(), "incident.lookup");
    /// assert!(matches!(index.search_regex("(?<=a)b", 5), Err(SearchError::InvalidPattern { .. })));
    /// # Ok::<(), SearchError>(())
    /// ```
    pub fn search_regex(&self, pattern: &str, limit: usize) -> Result<Vec<Hit<'_>>, SearchError> {
        let pattern = python_to_rust(pattern);
        let re = compile(&pattern, false)?;
        if limit == 0 {
            return Ok(Vec::new());
        }
        if !scan_safe(&pattern) {
            let cands = (0..self.docs.len())
                .filter_map(|d| {
                    let score = self.regex_score(&re, &self.docs[d]);
                    (score > 0.0).then_some((d as u32, score))
                })
                .collect();
            return Ok(self.hits(cands, limit));
        }
        // One pass over all the texts, each followed by `\n`, with `^` and `$` holding at every line. Every match
        // within a text is a match here too (see `scan_safe`), and a match here that lies within a text of one
        // line is a match of that text. Other matches (across a `\n`, or in a text of several lines) are checked
        // on the text where they start. The pass then goes on from the next text, so a match across texts hides
        // no match of the next one.
        let scan = compile(&pattern, true)?;
        let mut cands = Vec::new();
        let mut current: Option<(u32, u8)> = None;
        let mut at = 0;
        while let Some(m) = scan.find_at(&self.haystack, at) {
            // An empty match after the last `\n` is in no text.
            if m.start() >= self.haystack.len() {
                break;
            }
            let t = self.text_starts.partition_point(|&s| s <= m.start()) - 1;
            let (start, end) = (self.text_starts[t], self.text_starts[t + 1] - 1);
            let text = &self.haystack[start..end];
            let (doc, field) = self.text_owner[t];
            let matched =
                !text.is_empty() && if m.end() <= end && !text.contains('\n') { true } else { re.is_match(text) };
            if matched {
                match &mut current {
                    Some((d, fields)) if *d == doc => *fields |= 1 << field,
                    _ => {
                        cands.extend(current.map(|(d, fields)| (d, fields_score(fields))));
                        current = Some((doc, 1 << field));
                    }
                }
            }
            at = self.text_starts[t + 1];
        }
        cands.extend(current.map(|(d, fields)| (d, fields_score(fields))));
        Ok(self.hits(cands, limit))
    }

    /// A document's regex score: the weights of the fields where `re` matches.
    fn regex_score(&self, re: &regex::Regex, doc: &Document) -> f32 {
        let is_match = |text: &str| !text.is_empty() && re.is_match(text);
        let mut score = 0.0;
        if is_match(doc.name()) {
            score += WEIGHTS[NAME];
        }
        if is_match(doc.description()) {
            score += WEIGHTS[DESCRIPTION];
        }
        if doc.params().any(|(name, _)| is_match(name)) {
            score += WEIGHTS[PARAM_NAMES];
        }
        if doc.params().any(|(_, docs)| is_match(docs)) {
            score += WEIGHTS[PARAM_DOCS];
        }
        score
    }
}

/// The regex score of the fields in a bit set.
fn fields_score(fields: u8) -> f32 {
    (0..FIELDS).filter(|f| fields & (1 << f) != 0).map(|f| WEIGHTS[f]).sum()
}

/// Builds the inverted index: the vocabulary, and each term's postings with their BM25F impacts.
fn invert(docs: &[Document]) -> (HashMap<Box<str>, u32>, Vec<usize>, Vec<Posting>) {
    struct Entry {
        term: u32,
        doc: u32,
        tf: [u32; FIELDS],
    }
    let mut terms: HashMap<Box<str>, u32> = HashMap::new();
    let mut entries: Vec<Entry> = Vec::new();
    let mut lengths: Vec<[u32; FIELDS]> = Vec::with_capacity(docs.len());
    // Per term: the last document that had it, and its entry's place in `entries`.
    let mut last: Vec<(u32, usize)> = Vec::new();
    let mut buf = String::new();
    for (d, doc) in docs.iter().enumerate() {
        let d = d as u32;
        let mut len = [0u32; FIELDS];
        let mut add = |text: &str, field: usize| {
            for_each_term(text, &mut buf, |t| {
                let id = match terms.get(t) {
                    Some(&id) => id,
                    None => {
                        let id = terms.len() as u32;
                        terms.insert(t.into(), id);
                        last.push((u32::MAX, 0));
                        id
                    }
                };
                let (seen_in, at) = &mut last[id as usize];
                if *seen_in != d {
                    *seen_in = d;
                    *at = entries.len();
                    entries.push(Entry { term: id, doc: d, tf: [0; FIELDS] });
                }
                let tf = &mut entries[*at].tf[field];
                *tf = tf.saturating_add(1);
                len[field] = len[field].saturating_add(1);
            });
        };
        add(doc.name(), NAME);
        add(doc.description(), DESCRIPTION);
        for (name, docs) in doc.params() {
            add(name, PARAM_NAMES);
            add(docs, PARAM_DOCS);
        }
        lengths.push(len);
    }

    let n = docs.len() as f64;
    let mut avg = [0f64; FIELDS];
    for len in &lengths {
        for f in 0..FIELDS {
            avg[f] += f64::from(len[f]);
        }
    }
    for a in &mut avg {
        *a /= n.max(1.0);
    }

    let mut offsets = vec![0usize; terms.len() + 1];
    for e in &entries {
        offsets[e.term as usize + 1] += 1;
    }
    for t in 0..terms.len() {
        offsets[t + 1] += offsets[t];
    }
    let mut next = offsets.clone();
    let mut postings = vec![Posting { doc: 0, impact: 0.0 }; entries.len()];
    for e in &entries {
        let t = e.term as usize;
        let df = (offsets[t + 1] - offsets[t]) as f64;
        let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
        let len = &lengths[e.doc as usize];
        let mut tf = 0f64;
        for f in 0..FIELDS {
            if e.tf[f] == 0 {
                continue;
            }
            let b = f64::from(LENGTH_NORM[f]);
            let norm = if avg[f] > 0.0 { 1.0 - b + b * f64::from(len[f]) / avg[f] } else { 1.0 };
            tf += f64::from(WEIGHTS[f]) * f64::from(e.tf[f]) / norm;
        }
        let k1 = f64::from(K1);
        let impact = idf * tf * (k1 + 1.0) / (k1 + tf);
        postings[next[t]] = Posting { doc: e.doc, impact: impact as f32 };
        next[t] += 1;
    }
    (terms, offsets, postings)
}

/// A name as compared with a query for an exact match.
fn normalize_name(name: &str) -> String {
    name.chars().flat_map(char::to_lowercase).map(|c| if c == '-' { '.' } else { c }).collect()
}

fn check_vector(v: &[f32], dim: Option<usize>, document: Option<&str>) -> Result<(), SearchError> {
    let document = || document.map(str::to_owned);
    if v.is_empty() {
        return Err(SearchError::InvalidEmbedding { reason: "it is empty", document: document() });
    }
    if let Some(dim) = dim
        && v.len() != dim
    {
        return Err(SearchError::DimensionMismatch { expected: dim, found: v.len(), document: document() });
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(SearchError::InvalidEmbedding { reason: "it holds a NaN or an infinity", document: document() });
    }
    Ok(())
}

/// Appends `v` scaled to unit length (all zeros if it is zero). Its values are finite.
fn push_unit(out: &mut Vec<f32>, v: &[f32]) {
    let norm = v.iter().map(|&x| f64::from(x) * f64::from(x)).sum::<f64>().sqrt();
    if norm > 0.0 {
        out.extend(v.iter().map(|&x| (f64::from(x) / norm) as f32));
    } else {
        out.extend(v.iter().map(|_| 0.0));
    }
}

/// Compiles a pattern for [`SearchIndex::search_regex`]; `scan` for the pass over the whole haystack.
fn compile(pattern: &str, scan: bool) -> Result<regex::Regex, SearchError> {
    let len = pattern.chars().count();
    if len > MAX_PATTERN_LEN {
        return Err(SearchError::PatternTooLong { len, max: MAX_PATTERN_LEN });
    }
    regex::RegexBuilder::new(pattern)
        .multi_line(scan)
        .size_limit(MAX_PATTERN_SIZE)
        .dfa_size_limit(MAX_PATTERN_SIZE)
        .nest_limit(PATTERN_NEST_LIMIT)
        .build()
        .map_err(|e| match e {
            regex::Error::CompiledTooBig(limit) => SearchError::PatternTooComplex { limit },
            regex::Error::Syntax(message) => SearchError::InvalidPattern { message },
            other => SearchError::InvalidPattern { message: other.to_string() },
        })
}

/// Whether every match of `pattern` within one text is also a match, in multi-line mode, within the haystack
/// where that text is followed by `\n` (and preceded by one, or starts it).
///
/// Most of the syntax sees no difference, and word boundaries (`\b`, `\B`) do not either, since `\n` is not a
/// word character, like the edges of a text. `^` and `$` at the edges of a text hold at the `\n`s in
/// multi-line mode. What does differ is `\A` and `\z`, which hold only at the ends of the whole haystack, and
/// a flag group turning multi-line mode off (`(?-m)`): for those (conservatively, for any `\A`, `\z` or `-` in
/// a flag group, even where it means something else), the texts are matched one by one instead.
fn scan_safe(pattern: &str) -> bool {
    if pattern.contains(r"\A") || pattern.contains(r"\z") {
        return false;
    }
    let mut rest = pattern;
    while let Some(i) = rest.find("(?") {
        let flags = &rest[i + 2..];
        let end = flags.find([')', ':']).unwrap_or(flags.len());
        let group = &flags[..end];
        if group.contains('-') && group.chars().all(|c| c.is_ascii_alphabetic() || c == '-') {
            return false;
        }
        rest = &flags[end..];
    }
    true
}

/// Python's `\Z` is the regex crate's `\z`; everything else is passed on.
fn python_to_rust(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c == '\\'
            && let Some(next) = chars.next()
        {
            out.push(if next == 'Z' { 'z' } else { next });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn python_end_of_text() {
        assert_eq!(python_to_rust(r"a\Z"), r"a\z");
        assert_eq!(python_to_rust(r"a\\Z"), r"a\\Z");
        assert_eq!(python_to_rust(r"\d+\\"), r"\d+\\");
        assert_eq!(python_to_rust("\\"), "\\");
    }

    #[test]
    fn regex_scan_finds_what_texts_one_by_one_find() {
        let index = SearchIndex::build([
            Document::new("alpha.one", "First line.\nSecond line ends here").with_param("a_b", "x\ny"),
            Document::new("beta", "").with_param("", "tail e"),
            Document::new("", "Word bound-ary; the END").with_param("q", "e"),
            Document::new("gamma", "e\n"),
        ]);
        let patterns = [
            "",
            "^",
            "$",
            "^$",
            "e",
            "^b",
            "e$",
            "^Second",
            "here$",
            r"\bbound\b",
            r"\Bound",
            "(?s)one.First",
            r"x\ny",
            "(?m)^Second",
            r"\n",
            "(?-m)^e$",
            r"\Aalpha",
            r"e\z",
            r"e\Z",
            "(?i)end$",
            "(?P<w>[a-z]-?)e$",
            r"^\w+\.\w+$",
            "(?is-m)^f.*y$",
            r"[\s\S]{3}$",
        ];
        for p in patterns {
            let translated = python_to_rust(p);
            let re = compile(&translated, false).unwrap();
            let mut expected: Vec<usize> =
                (0..index.len()).filter(|&d| index.regex_score(&re, &index.docs[d]) > 0.0).collect();
            expected.sort_by_key(|&d| index.name_rank[d]);
            let mut found: Vec<usize> = index.search_regex(p, 10).unwrap().iter().map(|h| h.index()).collect();
            found.sort_by_key(|&d| index.name_rank[d]);
            assert_eq!(found, expected, "{p:?} (scanned: {})", scan_safe(&translated));
        }
        assert!(scan_safe("(?P<x>[a-z])(?i:b)"));
        assert!(!scan_safe("(?i-m)^a"));
    }

    #[test]
    fn regex_scan_agrees_on_random_texts_and_patterns() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = move |n: usize| {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) % n as u64) as usize
        };
        const TEXT: &[&str] = &["a", "b", "ab", " ", "\n", "-", "é", "_"];
        const PATTERN: &[&str] = &[
            "a", "b", "^", "$", r"\b", r"\B", ".", "(?s).", r"\n", r"\s", "*", "+", "?", "(?m)", "(?-m)", r"\A", r"\z",
            "|",
        ];
        let text =
            |next: &mut dyn FnMut(usize) -> usize| (0..next(5)).map(|_| TEXT[next(TEXT.len())]).collect::<String>();
        let docs: Vec<Document> = (0..40)
            .map(|_| {
                let mut doc = Document::new(text(&mut next), text(&mut next));
                for _ in 0..next(3) {
                    doc = doc.with_param(text(&mut next), text(&mut next));
                }
                doc
            })
            .collect();
        let index = SearchIndex::build(docs);
        let mut checked = 0;
        for _ in 0..2_000 {
            let p: String = (0..1 + next(5)).map(|_| PATTERN[next(PATTERN.len())]).collect();
            let Ok(re) = compile(&p, false) else { continue };
            let expected: Vec<usize> =
                (0..index.len()).filter(|&d| index.regex_score(&re, &index.docs[d]) > 0.0).collect();
            let mut found: Vec<usize> = index.search_regex(&p, 100).unwrap().iter().map(|h| h.index()).collect();
            found.sort_unstable();
            assert_eq!(found, expected, "{p:?}");
            checked += 1;
        }
        assert!(checked > 500, "{checked}");
    }

    #[test]
    fn impacts_are_positive() {
        let docs: Vec<Document> =
            (0..50).map(|i| Document::new(format!("tool.n{i}"), "the same words in every tool")).collect();
        let (_, _, postings) = invert(&docs);
        assert!(postings.iter().all(|p| p.impact > 0.0 && p.impact.is_finite()));
    }
}
