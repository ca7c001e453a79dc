//! TLS for the connections (feature `rustls`): a rustls configuration of each connector's own, with the
//! `aws-lc-rs` provider given explicitly (nothing is installed process-wide), the roots of `sslrootcert` or
//! Mozilla's (webpki-roots), and a certificate verifier per `sslmode`.

use std::error::Error;
use std::path::Path;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::conninfo::{RootCert, Verify};
use crate::error::PgError;

/// The connector for connections that verify `verify` against `roots` (Mozilla's when `None`).
pub(crate) fn connector(verify: Verify, roots: Option<&RootCert>) -> Result<MakeRustlsConnect, PgError> {
    let provider = keel_tools_tls::provider();
    let builder =
        ClientConfig::builder_with_provider(provider.clone()).with_safe_default_protocol_versions().map_err(|e| {
            PgError::Config {
                message: format!("the TLS configuration for PostgreSQL cannot be built: {e}"),
                source: Some(Arc::new(e)),
            }
        })?;
    let mut config = match verify {
        Verify::Nothing => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate { provider }))
            .with_no_client_auth(),
        Verify::Chain => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(ChainOnly(webpki(roots, provider)?)))
            .with_no_client_auth(),
        Verify::Full => builder.with_webpki_verifier(webpki(roots, provider)?).with_no_client_auth(),
    };
    // PostgreSQL's protocol name: required by a server reached with `sslnegotiation=direct`, ignored otherwise.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(MakeRustlsConnect::new(config))
}

/// rustls's verifier of chains and names, over `roots`.
fn webpki(roots: Option<&RootCert>, provider: Arc<CryptoProvider>) -> Result<Arc<WebPkiServerVerifier>, PgError> {
    let store = match roots {
        Some(RootCert::File(path)) => read_roots(path)?,
        Some(RootCert::System) | None => keel_tools_tls::mozilla_roots(),
    };
    WebPkiServerVerifier::builder_with_provider(Arc::new(store), provider).build().map_err(|e| PgError::Config {
        message: format!("the TLS roots for PostgreSQL cannot be used: {e}"),
        source: Some(Arc::new(e)),
    })
}

/// The CA certificates of the PEM file `path` (`sslrootcert`).
fn read_roots(path: &Path) -> Result<RootCertStore, PgError> {
    let shown = path.display();
    let pem = std::fs::read(path).map_err(|e| PgError::Config {
        message: format!("sslrootcert {shown} cannot be read: {e}"),
        source: Some(Arc::new(e)),
    })?;
    let mut store = RootCertStore::empty();
    keel_tools_tls::add_pem_roots(&mut store, &pem, &format!("sslrootcert {shown}"))
        .map_err(|e| PgError::Config { message: e.to_string(), source: Some(Arc::new(e)) })?;
    Ok(store)
}

/// `sslmode=require` (or `prefer`) without `sslrootcert`: any certificate, as libpq; the handshake's signatures
/// are still checked with the provider's algorithms, so the connection is encrypted to the key that signed it.
#[derive(Debug)]
struct AnyCertificate {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}

/// `sslmode=verify-ca`: rustls's verifier, all of whose verdicts stand but the one on the host name. (It checks
/// the chain before the name, so a name error means the chain was good.)
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            verdict => verdict,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// What to do about the certificate problem in `e`'s chain, if it holds one: rustls's error, which tokio-rustls
/// wraps in an `io::Error`.
pub(crate) fn hint(e: &(dyn Error + 'static)) -> Option<&'static str> {
    let mut next = Some(e);
    while let Some(e) = next {
        let tls = e.downcast_ref::<rustls::Error>().or_else(|| {
            e.downcast_ref::<std::io::Error>()
                .and_then(std::io::Error::get_ref)
                .and_then(|e| e.downcast_ref::<rustls::Error>())
        });
        if let Some(rustls::Error::InvalidCertificate(problem)) = tls {
            return match problem {
                CertificateError::UnknownIssuer => Some(
                    "the server's certificate is not signed by a CA the connection trusts: name the CA's PEM file \
                     with sslrootcert",
                ),
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => Some(
                    "the server's certificate does not hold the host name connected to: connect by a name it holds, \
                     or verify the chain only with sslmode=verify-ca",
                ),
                _ => None,
            };
        }
        next = e.source();
    }
    None
}

#[cfg(test)]
mod tests {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};

    use super::*;

    /// The PEM of a CA named `ca_name` and a leaf certificate it signed for `names`.
    fn pki(ca_name: &str, names: &[&str]) -> (String, CertificateDer<'static>) {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, ca_name);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let leaf = CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
            .unwrap()
            .signed_by(&KeyPair::generate().unwrap(), &ca)
            .unwrap();
        (ca.pem(), leaf.der().clone())
    }

    fn verifier(ca_pem: &str) -> Arc<WebPkiServerVerifier> {
        let dir =
            std::env::temp_dir().join(format!("keel-pg-tls-{}-{:?}", std::process::id(), std::thread::current().id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ca.pem");
        std::fs::write(&path, ca_pem).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let verifier = webpki(Some(&RootCert::File(path)), provider).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        verifier
    }

    fn check(v: &dyn ServerCertVerifier, leaf: &CertificateDer<'_>, name: &str) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(name.to_owned()).unwrap();
        v.verify_server_cert(leaf, &[], &name, &[], UnixTime::now()).map(|_| ())
    }

    #[test]
    fn verify_ca_overlooks_the_name_and_nothing_else() {
        let (ca, leaf) = pki("keel test CA", &["localhost"]);
        let (other_ca, other_leaf) = pki("another CA", &["localhost"]);
        let full = verifier(&ca);
        let chain = ChainOnly(verifier(&ca));
        check(&*full, &leaf, "localhost").unwrap();
        check(&chain, &leaf, "localhost").unwrap();
        let wrong = check(&*full, &leaf, "wrong.example").unwrap_err();
        assert!(wrong.to_string().contains("not valid for name \"wrong.example\""), "{wrong}");
        check(&chain, &leaf, "wrong.example").unwrap();
        for v in [&*full as &dyn ServerCertVerifier, &chain] {
            let e = check(v, &other_leaf, "localhost").unwrap_err();
            assert_eq!(e, rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer));
        }
        assert!(check(&*verifier(&other_ca), &leaf, "wrong.example").is_err());
        // Mozilla's roots do not hold a test CA.
        let mozilla = webpki(None, Arc::new(rustls::crypto::aws_lc_rs::default_provider())).unwrap();
        assert!(check(&*mozilla, &leaf, "localhost").is_err());
        assert!(
            check(
                &AnyCertificate { provider: Arc::new(rustls::crypto::aws_lc_rs::default_provider()) },
                &other_leaf,
                "x"
            )
            .is_ok()
        );
    }

    #[test]
    fn a_root_file_that_is_missing_or_not_pem_is_a_configuration_error() {
        let provider = || Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let missing = std::env::temp_dir().join("keel-pg-tls-no-such-dir/ca.pem");
        let e = webpki(Some(&RootCert::File(missing)), provider()).unwrap_err();
        assert_eq!(e.code(), "config_error");
        assert!(e.to_string().contains("cannot be read"), "{e}");
        assert!(e.source().is_some_and(|s| s.is::<std::io::Error>()), "{e:?}");

        let dir = std::env::temp_dir().join(format!("keel-pg-tls-notpem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ca.pem");
        std::fs::write(&path, "not a certificate\n").unwrap();
        let e = webpki(Some(&RootCert::File(path)), provider()).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(e.code(), "config_error");
        assert!(e.to_string().contains("holds no PEM certificate"), "{e}");
    }

    #[test]
    fn the_hint_names_the_certificate_problem_through_the_io_error() {
        let unknown = std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        assert!(hint(&unknown).unwrap().contains("sslrootcert"));
        let name = rustls::Error::InvalidCertificate(CertificateError::NotValidForName);
        assert!(hint(&name).unwrap().contains("verify-ca"));
        assert_eq!(hint(&std::io::Error::other("refused")), None);
    }
}
