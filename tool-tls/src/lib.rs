//! keel's TLS client configuration: [`client_config`] is what every HTTPS client of keel is given (the model
//! clients of keel-tools-agent, the MCP client and the token introspection client of keel-tools-mcp), and
//! [`add_pem_roots`] reads a private CA's PEM file for them and for keel-tools-postgres's `sslrootcert`.
//!
//! The crypto provider is rustls' `aws-lc-rs` (reqwest's default), given to each configuration: nothing is
//! installed process-wide, so other rustls or reqwest users in the binary keep their own choice. The trusted roots
//! are Mozilla's, compiled in from `webpki-roots`, plus those a deployment adds. webpki-roots rather than the
//! platform's store: the same roots on every machine, including containers without a CA bundle (where
//! `rustls-platform-verifier` cannot be built at all).
//!
//! ```
//! // Mozilla's roots alone.
//! let config = keel_tools_tls::client_config(&[]).unwrap();
//! assert!(config.alpn_protocols.is_empty());
//!
//! // A bundle that is not PEM says which of the extra roots it was.
//! let e = keel_tools_tls::client_config(&[b"not a certificate".to_vec()]).unwrap_err();
//! assert_eq!(e.to_string(), "root certificate 1 holds no PEM certificate");
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::error::Error;
use std::fmt;
use std::sync::Arc;

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use rustls::{ClientConfig, RootCertStore};

/// The crypto provider of every configuration keel makes: rustls' `aws-lc-rs`.
pub fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

/// Mozilla's roots, compiled in from webpki-roots.
pub fn mozilla_roots() -> RootCertStore {
    RootCertStore { roots: webpki_roots::TLS_SERVER_ROOTS.to_vec() }
}

/// A client configuration that trusts Mozilla's roots and the CA certificates of `extra` (each a PEM bundle of one
/// or more certificates; named "root certificate 1", "root certificate 2", … in errors), with the `aws-lc-rs`
/// provider, rustls' safe default protocol versions and no client certificate.
///
/// # Errors
///
/// A bundle of `extra` that is not PEM, holds no certificate or holds one that is not a usable CA; a provider that
/// cannot make a configuration.
pub fn client_config(extra: &[Vec<u8>]) -> Result<ClientConfig, TlsError> {
    let mut roots = mozilla_roots();
    for (i, pem) in extra.iter().enumerate() {
        add_pem_roots(&mut roots, pem, &format!("root certificate {}", i + 1))?;
    }
    Ok(ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_root_certificates(roots)
        .with_no_client_auth())
}

/// Adds every certificate of the PEM bundle `pem` to `roots`; `label` names the bundle in errors (`root certificate
/// 1`, `sslrootcert /etc/keel/pg-ca.pem`).
///
/// # Errors
///
/// The bundle is not PEM, holds no certificate, or holds one that is not a usable CA; `roots` may then hold the
/// bundle's certificates before the bad one.
pub fn add_pem_roots(roots: &mut RootCertStore, pem: &[u8], label: &str) -> Result<(), TlsError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| TlsError::NotPem { label: label.to_owned(), source })?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate { label: label.to_owned() });
    }
    for cert in certs {
        roots.add(cert).map_err(|source| TlsError::NotCa { label: label.to_owned(), source })?;
    }
    Ok(())
}

/// Why a configuration could not be made.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsError {
    /// A root bundle that is not PEM.
    NotPem {
        /// Which bundle.
        label: String,
        /// The PEM parser's error.
        source: rustls::pki_types::pem::Error,
    },
    /// A root bundle with no certificate in it.
    NoCertificate {
        /// Which bundle.
        label: String,
    },
    /// A root bundle holding a certificate that cannot be a trust anchor.
    NotCa {
        /// Which bundle.
        label: String,
        /// rustls's error.
        source: rustls::Error,
    },
    /// The provider could not make a configuration.
    Config(rustls::Error),
}

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TlsError::NotPem { label, source } => write!(f, "{label} is not PEM: {source}"),
            TlsError::NoCertificate { label } => write!(f, "{label} holds no PEM certificate"),
            TlsError::NotCa { label, source } => {
                write!(f, "{label} holds a certificate that is not a usable CA: {source}")
            }
            TlsError::Config(source) => write!(f, "cannot configure TLS: {source}"),
        }
    }
}

impl Error for TlsError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            TlsError::NotPem { source, .. } => Some(source),
            TlsError::NoCertificate { .. } => None,
            TlsError::NotCa { source, .. } => Some(source),
            TlsError::Config(source) => Some(source),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_private_ca_is_trusted_beside_mozillas_roots() {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap();
        let mut roots = mozilla_roots();
        let before = roots.len();
        add_pem_roots(&mut roots, ca.pem().as_bytes(), "root certificate 1").unwrap();
        assert_eq!(roots.len(), before + 1);
        client_config(&[ca.pem().into_bytes()]).expect("a configuration with the private CA");
    }

    #[test]
    fn a_bad_bundle_is_named_and_keeps_its_cause() {
        let e = client_config(&[b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n".to_vec()])
            .unwrap_err();
        assert!(e.to_string().starts_with("root certificate 1 is not PEM: "), "{e}");
        assert!(e.source().is_some());
        let e = add_pem_roots(&mut mozilla_roots(), b"", "sslrootcert /etc/ca.pem").unwrap_err();
        assert_eq!(e.to_string(), "sslrootcert /etc/ca.pem holds no PEM certificate");
        assert!(e.source().is_none());
    }
}
