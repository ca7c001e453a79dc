//! Text analysis shared by indexing and queries: splitting into words, lowercasing, stemming, stopwords.
//!
//! The same analysis runs on documents and on queries, so a query word meets the words of the documents in the
//! same form. It is deterministic and depends on nothing but the text.

/// Calls `f` with each word of `text`, lowercased, in `buf` (which `f` may change, e.g. by stemming it).
///
/// Words are the runs of alphanumeric characters (Unicode `Alphabetic` or `Numeric`), cut further at camelCase
/// boundaries: before an uppercase letter that follows a lowercase letter or a digit (`invoiceId` -> `invoice`,
/// `id`), and before the last uppercase letter of a run of them when a lowercase letter follows
/// (`HTTPServer` -> `http`, `server`). Everything else (`.`, `_`, `-`, spaces, punctuation) separates words.
pub(crate) fn for_each_word(text: &str, buf: &mut String, mut f: impl FnMut(&mut String)) {
    for run in text.split(|c: char| !c.is_alphanumeric()) {
        if run.is_empty() {
            continue;
        }
        let mut start = 0;
        let mut prev: Option<char> = None;
        let mut chars = run.char_indices().peekable();
        while let Some((i, c)) = chars.next() {
            if let Some(p) = prev {
                let next = chars.peek().map(|&(_, n)| n);
                let boundary = c.is_uppercase()
                    && (p.is_lowercase()
                        || p.is_numeric()
                        || (p.is_uppercase() && next.is_some_and(char::is_lowercase)));
                if boundary {
                    emit(&run[start..i], buf, &mut f);
                    start = i;
                }
            }
            prev = Some(c);
        }
        emit(&run[start..], buf, &mut f);
    }
}

fn emit(piece: &str, buf: &mut String, f: &mut impl FnMut(&mut String)) {
    buf.clear();
    if piece.is_ascii() {
        buf.push_str(piece);
        buf.make_ascii_lowercase();
    } else {
        for c in piece.chars() {
            buf.extend(c.to_lowercase());
        }
    }
    f(buf);
}

/// Calls `f` with each term of `text`: its words, stemmed (see [`stem`]).
pub(crate) fn for_each_term(text: &str, buf: &mut String, mut f: impl FnMut(&str)) {
    for_each_word(text, buf, |word| {
        stem(word);
        f(word);
    });
}

/// A light English stemmer: a few suffix rules, applied once each, in order, to lowercase ASCII words longer than
/// three letters (other words are left as they are).
///
/// 1. Plurals: `-ies` -> `-y` (`queries` -> `query`); `-sses` -> `-ss`; `-xes`, `-ches`, `-shes`, `-zes` lose the
///    `-es` (`boxes` -> `box`); otherwise a final `-s` goes unless the word ends in `-ss`, `-us` or `-is`
///    (`refunds` -> `refund`, `status` stays).
/// 2. Tenses: `-ied` -> `-y`; `-ing` (leaving 3 or more letters with a vowel) and `-ed` (leaving 3 or more with a
///    vowel) go, and a doubled final consonant other than `l`, `s`, `z` is then undoubled
///    (`stopped` -> `stop`, `refunding` -> `refund`).
/// 3. A final `-e` goes when more than three letters remain (`create`, `created`, `creating` -> `creat`).
///
/// The result is not always a word; it only needs to be the same for the forms of one word, which it is for
/// regular inflections.
pub(crate) fn stem(w: &mut String) {
    if w.len() <= 3 || !w.is_ascii() {
        return;
    }
    // 1. Plurals.
    if w.ends_with("ies") && w.len() > 4 {
        w.truncate(w.len() - 3);
        w.push('y');
    } else if ["sses", "xes", "ches", "shes", "zes"].iter().any(|s| w.ends_with(s)) {
        w.truncate(w.len() - 2);
    } else if w.ends_with('s') && !["ss", "us", "is"].iter().any(|s| w.ends_with(s)) {
        w.pop();
    }
    // 2. Tenses.
    let n = w.len();
    if w.ends_with("ied") && n > 4 {
        w.truncate(n - 3);
        w.push('y');
    } else if w.ends_with("ing") && n >= 6 && has_vowel(&w[..n - 3]) {
        w.truncate(n - 3);
        undouble(w);
    } else if w.ends_with("ed") && n >= 5 && has_vowel(&w[..n - 2]) {
        w.truncate(n - 2);
        undouble(w);
    }
    // 3. A final e.
    if w.len() > 4 && w.ends_with('e') {
        w.pop();
    }
}

fn has_vowel(s: &str) -> bool {
    s.bytes().any(|b| matches!(b, b'a' | b'e' | b'i' | b'o' | b'u' | b'y'))
}

fn undouble(w: &mut String) {
    let b = w.as_bytes();
    if let [.., x, y] = b
        && x == y
        && !matches!(x, b'a' | b'e' | b'i' | b'o' | b'u' | b'l' | b's' | b'z')
        && x.is_ascii_alphabetic()
    {
        w.pop();
    }
}

/// Words dropped from a query when it holds any other word (lowercase, before stemming). Documents keep them:
/// a query of stopwords alone (`"list all"`) still matches. `s` and `t` are what is left of `customer's` and
/// `don't` once split at the apostrophe.
const STOPWORDS: &[&str] = &[
    "a", "about", "an", "and", "any", "are", "as", "at", "be", "by", "can", "could", "do", "does", "for", "from",
    "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "need", "of", "on", "or", "our", "please",
    "s", "should", "some", "t", "that", "the", "their", "them", "then", "there", "these", "this", "to", "tool",
    "tools", "us", "want", "was", "we", "what", "when", "where", "which", "who", "will", "with", "would", "you",
    "your",
];

/// Whether a lowercase word is a stopword.
pub(crate) fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn terms(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for_each_term(text, &mut String::new(), |t| out.push(t.to_owned()));
        out
    }

    #[test]
    fn stopwords_are_sorted() {
        assert!(STOPWORDS.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn splits_names_and_camel_case() {
        assert_eq!(terms("incident.lookup"), ["incident", "lookup"]);
        assert_eq!(terms("invoice_id"), ["invoic", "id"]);
        assert_eq!(terms("getHTTPServer-v2"), ["get", "http", "server", "v2"]);
        assert_eq!(terms("userId2FA"), ["user", "id2", "fa"]);
        assert_eq!(terms("  "), Vec::<String>::new());
        assert_eq!(terms("Ünïcode ÉTÉ"), ["ünïcode", "été"]);
    }

    #[test]
    fn stems_regular_inflections_alike() {
        let same = [
            ["refund", "refunds", "refunded", "refunding"],
            ["create", "creates", "created", "creating"],
            ["stop", "stops", "stopped", "stopping"],
            ["query", "queries", "queried", "query"],
            ["match", "matches", "matched", "matching"],
            ["invoice", "invoices", "invoiced", "invoicing"],
            ["address", "addresses", "addressed", "addressing"],
            ["bill", "bills", "billed", "billing"],
        ];
        for group in same {
            let first = terms(group[0]);
            for w in &group[1..] {
                assert_eq!(terms(w), first, "{w} vs {}", group[0]);
            }
        }
        assert_eq!(terms("status"), ["status"]);
        assert_eq!(terms("string strings"), ["string", "string"]);
        assert_eq!(terms("use uses"), ["use", "use"]);
    }
}
