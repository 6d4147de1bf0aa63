//! TLS for `--tls-cert` / `--tls-key`: a certificate chain and its private key in PEM
//! files, loaded once at start, offered to clients that ask (an SSLRequest answered
//! `S`, or PostgreSQL 17's direct TLS with the `postgresql` ALPN protocol).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls;

/// Why the TLS files could not be used.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM item.
    #[error("{}: {what}", .path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// The key does not go with the certificate, or rustls refused them.
    #[error("the TLS certificate and key cannot be used together: {0}")]
    Config(String),
}

/// The server side of TLS, shared by every connection.
#[derive(Clone)]
pub struct Acceptor(pub(crate) tokio_rustls::TlsAcceptor);

impl std::fmt::Debug for Acceptor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("tls::Acceptor")
    }
}

/// The acceptor for the certificate chain in `cert` and the private key in `key` (PEM).
pub fn acceptor(cert: &Path, key: &Path) -> Result<Acceptor, TlsError> {
    let file_error = |path: &Path, what: String| TlsError::File {
        path: path.to_path_buf(),
        what,
    };
    let chain = CertificateDer::pem_file_iter(cert)
        .map_err(|e| file_error(cert, format!("cannot read the certificate file: {e}")))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(cert, format!("not a PEM certificate: {e}")))?;
    if chain.is_empty() {
        return Err(file_error(cert, "holds no PEM certificate".into()));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| file_error(key, format!("holds no usable PEM private key: {e}")))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    // PostgreSQL's protocol name, which direct TLS (sslnegotiation=direct) requires.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(Acceptor(tokio_rustls::TlsAcceptor::from(Arc::new(config))))
}
