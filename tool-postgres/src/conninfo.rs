//! The TLS settings of a connection string, `sslmode` and `sslrootcert`, taken out of it before the rest goes to
//! tokio-postgres, whose parser knows only `disable`, `prefer` and `require` and no `sslrootcert`. Both forms are
//! read as tokio-postgres reads them: `key=value` pairs (values quoted with `'…'` or escaped with `\`), and
//! `postgresql://` (or `postgres://`) URLs with the settings as query parameters. The last of a repeated key wins,
//! as in libpq.

use std::ops::Range;
use std::path::PathBuf;

use crate::error::PgError;

/// libpq's `sslmode` values, with libpq's meanings (`allow` is not supported).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Plain TCP.
    Disable,
    /// TLS when the server offers it, else plain; the certificate is not verified (unless `sslrootcert` names the
    /// CAs: then the chain is).
    Prefer,
    /// TLS or no connection; the certificate is not verified (unless `sslrootcert` names the CAs: then the chain
    /// is, as with `verify-ca`).
    Require,
    /// TLS, the chain verified against the roots; the host name is not checked.
    VerifyCa,
    /// TLS, the chain and the host name verified.
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, PgError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            "allow" => {
                return Err(PgError::config(
                    "sslmode=allow (plain first, TLS only if the server insists) is not supported by keel's \
                     PostgreSQL connections: use disable, prefer, require, verify-ca or verify-full",
                ));
            }
            other => {
                return Err(PgError::config(format!(
                    "sslmode={other:?} in the PostgreSQL connection string is none of disable, prefer, require, \
                     verify-ca, verify-full"
                )));
            }
        })
    }

    /// The value as written in a connection string.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether a connection fails rather than go without TLS.
    #[cfg_attr(feature = "rustls", allow(dead_code, reason = "what a build without TLS refuses"))]
    pub(crate) fn requires_tls(self) -> bool {
        matches!(self, SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull)
    }

    /// The mode tokio-postgres knows that negotiates the same way.
    pub(crate) fn driver(self) -> tokio_postgres::config::SslMode {
        match self {
            SslMode::Disable => tokio_postgres::config::SslMode::Disable,
            SslMode::Prefer => tokio_postgres::config::SslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => tokio_postgres::config::SslMode::Require,
        }
    }
}

/// Where the CAs that verify the server's certificate come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RootCert {
    /// A PEM file of one or more CA certificates (`sslrootcert=PATH`).
    File(PathBuf),
    /// Mozilla's CAs, compiled in from webpki-roots (`sslrootcert=system`, libpq's name for the system's CAs).
    System,
}

/// How much of the server's certificate is verified.
#[cfg_attr(not(feature = "rustls"), allow(dead_code, reason = "nothing is verified without TLS"))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verify {
    /// Nothing but the handshake's signatures (an encrypted connection to whoever answers).
    Nothing,
    /// The chain, up to one of the roots; not the host name.
    Chain,
    /// The chain and the host name.
    Full,
}

/// What a connection string asks of TLS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TlsParams {
    /// `sslmode`; without it, [`SslMode::Disable`] (see [`TlsParams::mode`]).
    pub(crate) sslmode: Option<SslMode>,
    /// `sslrootcert`.
    pub(crate) rootcert: Option<RootCert>,
}

impl TlsParams {
    /// The mode in effect: `sslmode`, else `verify-full` with `sslrootcert=system` (libpq's rule), else `disable`:
    /// plain, as before TLS was supported (libpq's default is `prefer`; say so to get it). `sslrootcert=system`
    /// with a weaker mode is refused, as libpq refuses it.
    pub(crate) fn mode(&self) -> Result<SslMode, PgError> {
        match (self.sslmode, &self.rootcert) {
            (None, Some(RootCert::System)) => Ok(SslMode::VerifyFull),
            (None, _) => Ok(SslMode::Disable),
            (Some(mode), Some(RootCert::System)) if mode != SslMode::VerifyFull => Err(PgError::config(format!(
                "sslrootcert=system needs sslmode=verify-full (a weaker sslmode={} would not check the name the \
                     system's CAs vouch for)",
                mode.as_str()
            ))),
            (Some(mode), _) => Ok(mode),
        }
    }

    /// How much of the certificate `mode` verifies: `verify-full` everything, `verify-ca` the chain, `require` and
    /// `prefer` nothing, or the chain when `sslrootcert` names a file (libpq's rule, kept for old connection
    /// strings).
    #[cfg_attr(not(feature = "rustls"), allow(dead_code, reason = "nothing is verified without TLS"))]
    pub(crate) fn verify(&self, mode: SslMode) -> Verify {
        match mode {
            SslMode::VerifyFull => Verify::Full,
            SslMode::VerifyCa => Verify::Chain,
            SslMode::Disable | SslMode::Prefer | SslMode::Require => match self.rootcert {
                Some(RootCert::File(_)) => Verify::Chain,
                _ => Verify::Nothing,
            },
        }
    }
}

/// A connection string without its TLS settings, and those settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Split {
    /// The rest, for tokio-postgres's parser.
    pub(crate) rest: String,
    /// What was taken out.
    pub(crate) tls: TlsParams,
}

/// Takes `sslmode` and `sslrootcert` out of `conninfo`. A string this cannot read is handed over whole, for
/// tokio-postgres's parser to say what is wrong with it.
pub(crate) fn split(conninfo: &str) -> Result<Split, PgError> {
    let mut tls = TlsParams { sslmode: None, rootcert: None };
    let mut take = |key: &str, value: String| -> Result<bool, PgError> {
        match key {
            "sslmode" => tls.sslmode = Some(SslMode::parse(&value)?),
            "sslrootcert" if value == "system" => tls.rootcert = Some(RootCert::System),
            "sslrootcert" if value.is_empty() => {
                return Err(PgError::config("sslrootcert in the PostgreSQL connection string is empty"));
            }
            "sslrootcert" => tls.rootcert = Some(RootCert::File(PathBuf::from(value))),
            _ => return Ok(false),
        }
        Ok(true)
    };
    let rest = match ["postgresql://", "postgres://"].iter().find(|p| conninfo.starts_with(*p)) {
        Some(prefix) => split_url(conninfo, prefix.len(), &mut take)?,
        None => split_pairs(conninfo, &mut take)?,
    };
    Ok(Split { rest, tls })
}

/// A `key=value` string: the pairs `take` keeps are cut out, the rest left as written.
fn split_pairs(s: &str, take: &mut impl FnMut(&str, String) -> Result<bool, PgError>) -> Result<String, PgError> {
    let Some(pairs) = pairs(s) else { return Ok(s.to_owned()) };
    let mut rest = String::with_capacity(s.len());
    let mut at = 0;
    for (key, value, span) in pairs {
        if take(key, value)? {
            rest.push_str(&s[at..span.start]);
            at = span.end;
        }
    }
    rest.push_str(&s[at..]);
    Ok(rest)
}

/// The pairs of a `key=value` string, each with its span (from the end of the pair before), read as tokio-postgres reads them (it stops at a key
/// that is empty); `None` where its parser would fail.
fn pairs(s: &str) -> Option<Vec<(&str, String, Range<usize>)>> {
    let mut it = s.char_indices().peekable();
    let mut out = Vec::new();
    let at = |it: &mut std::iter::Peekable<std::str::CharIndices<'_>>| it.peek().map_or(s.len(), |&(i, _)| i);
    loop {
        // A pair's span starts with the spaces before it, so that cutting it out leaves one space between others.
        let lead = at(&mut it);
        while it.next_if(|&(_, c)| c.is_whitespace()).is_some() {}
        let start = at(&mut it);
        while it.next_if(|&(_, c)| !c.is_whitespace() && c != '=').is_some() {}
        let key = &s[start..at(&mut it)];
        if key.is_empty() {
            return Some(out);
        }
        while it.next_if(|&(_, c)| c.is_whitespace()).is_some() {}
        it.next_if(|&(_, c)| c == '=')?;
        while it.next_if(|&(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if it.next_if(|&(_, c)| c == '\'').is_some() {
            loop {
                match it.next()? {
                    (_, '\'') => break,
                    (_, '\\') => {
                        if let Some((_, c)) = it.next() {
                            value.push(c);
                        }
                    }
                    (_, c) => value.push(c),
                }
            }
        } else {
            while let Some((_, c)) = it.next_if(|&(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    if let Some((_, c)) = it.next() {
                        value.push(c);
                    }
                } else {
                    value.push(c);
                }
            }
            if value.is_empty() {
                return None;
            }
        }
        out.push((key, value, lead..at(&mut it)));
    }
}

/// A URL: the query parameters `take` keeps are cut out (and the `?` with them when none is left). The query starts
/// at the first `?` after the user information, where tokio-postgres's parser finds it.
fn split_url(
    s: &str,
    prefix: usize,
    take: &mut impl FnMut(&str, String) -> Result<bool, PgError>,
) -> Result<String, PgError> {
    let after_user = s[prefix..].find('@').map_or(prefix, |i| prefix + i + 1);
    let Some(query) = s[after_user..].find('?').map(|i| after_user + i) else { return Ok(s.to_owned()) };
    let mut kept = Vec::new();
    for param in s[query + 1..].split('&') {
        let taken = match param.split_once('=') {
            Some((key, value)) => match percent_decode(key) {
                Some(key) => {
                    let value = percent_decode(value).ok_or_else(|| {
                        PgError::config(format!(
                            "the value of {key} in the PostgreSQL connection URL is not UTF-8 once percent-decoded"
                        ))
                    })?;
                    take(&key, value)?
                }
                None => false,
            },
            None => false,
        };
        if !taken {
            kept.push(param);
        }
    }
    let mut rest = s[..query].to_owned();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    Ok(rest)
}

/// `%XX` decoded (a `%` not followed by two hex digits is kept, as the percent-encoding crate keeps it); `None` when
/// the bytes are not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(high), Some(low)) => {
                out.push(u8::try_from(high * 16 + low).unwrap_or(0));
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str) -> Option<RootCert> {
        Some(RootCert::File(PathBuf::from(path)))
    }

    #[test]
    fn key_value_strings_lose_their_tls_settings_and_keep_the_rest_as_written() {
        let s = split("host=db.internal port=5433 sslmode=verify-full sslrootcert=/etc/ca.pem user=keel").unwrap();
        assert_eq!(s.rest, "host=db.internal port=5433 user=keel");
        assert_eq!(s.tls, TlsParams { sslmode: Some(SslMode::VerifyFull), rootcert: file("/etc/ca.pem") });

        // Quotes, escapes and spaces around `=`, as tokio-postgres reads them; the last of a repeated key wins.
        let s = split(r"sslmode = require  host='a b' sslrootcert='/ca dir/it\'s.pem' sslmode=verify-ca").unwrap();
        assert_eq!(s.rest, "  host='a b'");
        assert_eq!(s.tls, TlsParams { sslmode: Some(SslMode::VerifyCa), rootcert: file("/ca dir/it's.pem") });
        let s = split(r"sslrootcert=/ca\ dir/ca.pem host=x").unwrap();
        assert_eq!((s.rest.as_str(), s.tls.rootcert), (" host=x", file("/ca dir/ca.pem")));

        // Nothing to take: the string as it was, and no mode (plain, see `TlsParams::mode`).
        let s = split("host=127.0.0.1 user=keel dbname=postgres").unwrap();
        assert_eq!(s.rest, "host=127.0.0.1 user=keel dbname=postgres");
        assert_eq!(s.tls, TlsParams { sslmode: None, rootcert: None });
        assert_eq!(s.tls.mode().unwrap(), SslMode::Disable);

        // What tokio-postgres's parser refuses is handed over whole, for it to say why.
        for broken in ["host=x sslmode", "host='x sslmode=require", "sslmode= "] {
            let s = split(broken).unwrap();
            assert_eq!((s.rest.as_str(), s.tls.sslmode), (broken, None), "{broken}");
            assert!(s.rest.parse::<tokio_postgres::Config>().is_err(), "{broken}");
        }
    }

    #[test]
    fn urls_lose_their_tls_query_parameters_and_keep_the_rest_as_written() {
        let s = split("postgresql://keel@db:5433/tools?sslmode=verify-full&sslrootcert=%2Fetc%2Fca%20x.pem").unwrap();
        assert_eq!(s.rest, "postgresql://keel@db:5433/tools");
        assert_eq!(s.tls, TlsParams { sslmode: Some(SslMode::VerifyFull), rootcert: file("/etc/ca x.pem") });

        let s = split("postgres://db/tools?application_name=x&sslmode=require&connect_timeout=3").unwrap();
        assert_eq!(s.rest, "postgres://db/tools?application_name=x&connect_timeout=3");
        assert_eq!(s.tls.sslmode, Some(SslMode::Require));

        // A `?` in the password is not the query's.
        let s = split("postgresql://keel:p?w@db/tools?sslmode=prefer").unwrap();
        assert_eq!((s.rest.as_str(), s.tls.sslmode), ("postgresql://keel:p?w@db/tools", Some(SslMode::Prefer)));
        let s = split("postgresql://db/tools").unwrap();
        assert_eq!((s.rest.as_str(), s.tls.sslmode), ("postgresql://db/tools", None));
        for rest in ["postgresql://db/tools", "postgresql://db/tools?connect_timeout=3", "postgresql://[::1]:5432/x"] {
            assert!(rest.parse::<tokio_postgres::Config>().is_ok(), "{rest}");
        }
    }

    #[test]
    fn bad_values_are_configuration_errors() {
        for bad in [
            "host=x sslmode=verify_full",
            "postgresql://db/x?sslmode=VERIFY-FULL",
            "host=x sslmode=allow",
            "host=x sslrootcert=''",
            "postgresql://db/x?sslrootcert=%FF",
        ] {
            let e = split(bad).unwrap_err();
            assert_eq!(e.code(), "config_error", "{bad}: {e}");
        }
        let e = split("host=x sslmode=verify_full").unwrap_err();
        assert!(e.to_string().contains("sslmode=\"verify_full\"") && e.to_string().contains("verify-full"), "{e}");
        let e = split("host=x sslmode=allow").unwrap_err();
        assert!(e.to_string().contains("sslmode=allow"), "{e}");
    }

    #[test]
    fn the_mode_and_what_it_verifies_follow_libpq() {
        let params = |sslmode, rootcert| TlsParams { sslmode, rootcert };
        let system = Some(RootCert::System);
        assert_eq!(params(None, system.clone()).mode().unwrap(), SslMode::VerifyFull);
        assert_eq!(params(None, file("ca.pem")).mode().unwrap(), SslMode::Disable);
        let e = params(Some(SslMode::Require), system.clone()).mode().unwrap_err();
        assert_eq!(e.code(), "config_error");
        assert!(e.to_string().contains("verify-full"), "{e}");

        let verify = |mode, rootcert| params(Some(mode), rootcert).verify(mode);
        assert_eq!(verify(SslMode::Require, None), Verify::Nothing);
        assert_eq!(verify(SslMode::Prefer, None), Verify::Nothing);
        assert_eq!(verify(SslMode::Require, file("ca.pem")), Verify::Chain);
        assert_eq!(verify(SslMode::VerifyCa, None), Verify::Chain);
        assert_eq!(verify(SslMode::VerifyFull, file("ca.pem")), Verify::Full);
        assert_eq!(verify(SslMode::VerifyFull, system), Verify::Full);
        assert!(!SslMode::Prefer.requires_tls() && SslMode::Require.requires_tls());
        assert_eq!(SslMode::VerifyCa.driver(), tokio_postgres::config::SslMode::Require);
    }
}
