//! What a query gives back ([`Hit`]), the embeddings hook ([`Embedder`]) and the errors ([`SearchError`]).

use std::fmt;
use std::sync::Arc;

/// One result of a search: which document, and how well it matched.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit<'a> {
    pub(crate) name: &'a str,
    pub(crate) index: usize,
    pub(crate) score: f32,
}

impl<'a> Hit<'a> {
    /// The document's name.
    pub fn name(&self) -> &'a str {
        self.name
    }

    /// The document's place in the documents the index was built from ([`SearchIndex::documents`](crate::SearchIndex::documents)).
    pub fn index(&self) -> usize {
        self.index
    }

    /// How well the document matched: positive, higher is better. Scores compare only within one result list.
    pub fn score(&self) -> f32 {
        self.score
    }
}

/// Turns text into a vector, for search by meaning ([`SearchIndex::with_embedder`](crate::SearchIndex::with_embedder)).
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
    /// The regex pattern is longer than [`MAX_PATTERN_LEN`](crate::MAX_PATTERN_LEN) characters.
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
    /// The regex pattern would compile to more than [`MAX_PATTERN_SIZE`](crate::MAX_PATTERN_SIZE) bytes (large counted repetitions).
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
