//! A TLS listener's settings ([`TlsSpec`]) and the `rustls::ServerConfig` built from them,
//! and the one-line reasons a failed handshake is logged with.
//!
//! The key material comes as DER: Python reads the key store and the trust store
//! (`config/tls_params.py`: PKCS12 or PEM, passwords, `keyStoreAlias`) and hands over the
//! certificate chain, the private key (PKCS8) and the trust anchors, so that the stores'
//! formats are read in one place. The crypto provider is `ring` (it builds with a C
//! compiler alone; aws-lc-rs wants cmake and more).
//!
//! Names and choices follow the socket shell's `transport/tls_contexts.py`, so a broker.xml
//! behaves alike with the plane on or off: `enabledProtocols` is TLS 1.2 and TLS 1.3 (rustls
//! speaks nothing older: an older one is an error at start, naming it), `enabledCipherSuites`
//! are IANA (Java) names, and a list without a TLS 1.3 suite limits the listener to TLS 1.2,
//! as in Java. A suite rustls lacks is an error at start, never dropped in silence.

use std::fmt::Write as _;
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, RootCertStore, ServerConfig, SupportedProtocolVersion};

use crate::error::{Error, Result};

/// Whether a client certificate is asked for (`needClientAuth` / `wantClientAuth`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ClientAuth {
    /// No certificate asked for.
    #[default]
    None,
    /// `wantClientAuth`: asked for, and verified against the trust anchors if given.
    Want,
    /// `needClientAuth`: a client without a certificate the trust anchors verify is refused.
    Need,
}

/// A TLS listener's settings, as Python read them from the acceptor's URL.
#[derive(Clone, Default)]
pub struct TlsSpec {
    /// The server's certificate first, then the rest of its chain (DER).
    pub cert_chain: Vec<Vec<u8>>,
    /// The private key, PKCS8 DER.
    pub key: Vec<u8>,
    pub client_auth: ClientAuth,
    /// The certificates that verify clients' (DER): the trust store's.
    pub trust_anchors: Vec<Vec<u8>>,
    /// `enabledProtocols`, Java names (`TLSv1.2`, `TLSv1.3`); empty: both.
    pub protocols: Vec<String>,
    /// `enabledCipherSuites`, IANA names (`TLS_AES_128_GCM_SHA256`,
    /// `TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256`); empty: rustls's defaults.
    pub cipher_suites: Vec<String>,
}

impl std::fmt::Debug for TlsSpec {
    // The key stays out of logs and panics.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSpec")
            .field("cert_chain", &self.cert_chain.len())
            .field("client_auth", &self.client_auth)
            .field("trust_anchors", &self.trust_anchors.len())
            .field("protocols", &self.protocols)
            .field("cipher_suites", &self.cipher_suites)
            .finish_non_exhaustive()
    }
}

/// The IANA name of a rustls suite (rustls spells the TLS 1.3 ones `TLS13_...`).
fn iana_name(suite: rustls::SupportedCipherSuite) -> String {
    let name = suite.suite().as_str().unwrap_or("?");
    match name.strip_prefix("TLS13_") {
        Some(rest) => format!("TLS_{rest}"),
        None => name.to_owned(),
    }
}

fn setting(text: impl Into<String>) -> Error {
    Error::Tls(text.into())
}

/// The versions `enabledProtocols` names (both when empty).
fn versions(spec: &TlsSpec) -> Result<Vec<&'static SupportedProtocolVersion>> {
    let mut versions = Vec::new();
    let names: Vec<&str> = if spec.protocols.is_empty() {
        vec!["TLSv1.2", "TLSv1.3"]
    } else {
        spec.protocols.iter().map(String::as_str).collect()
    };
    for name in names {
        match name {
            "TLSv1.2" => versions.push(&rustls::version::TLS12),
            "TLSv1.3" => versions.push(&rustls::version::TLS13),
            other => {
                return Err(setting(format!(
                    "enabledProtocols: {other} cannot be served by the data plane (rustls speaks \
                     TLSv1.2 and TLSv1.3 only); drop it, or serve this acceptor from the socket \
                     shell (ARTEMIS_PY_DATA_PLANE=0)"
                )))
            }
        }
    }
    Ok(versions)
}

/// The provider with `enabledCipherSuites` only (all of them when empty).
fn provider(spec: &TlsSpec) -> Result<CryptoProvider> {
    // Deprecated in rustls 0.23.48 for want of post-quantum key exchange (clients that
    // offer X25519MLKEM768 agree on X25519 instead). Kept: aws-lc-rs, the provider with it,
    // needs cmake and a long C build on every machine that builds the extension.
    #[allow(deprecated)]
    let mut provider = rustls::crypto::ring::default_provider();
    if spec.cipher_suites.is_empty() {
        return Ok(provider);
    }
    let mut chosen = Vec::new();
    let mut missing = Vec::new();
    for name in &spec.cipher_suites {
        match provider
            .cipher_suites
            .iter()
            .find(|s| iana_name(**s) == *name)
        {
            Some(suite) => chosen.push(*suite),
            None => missing.push(name.as_str()),
        }
    }
    if !missing.is_empty() {
        let mut known = String::new();
        for suite in &provider.cipher_suites {
            let _ = write!(
                known,
                "{}{}",
                if known.is_empty() { "" } else { ", " },
                iana_name(*suite)
            );
        }
        return Err(setting(format!(
            "enabledCipherSuites: {} not available in the data plane's TLS (rustls: {known}); \
             drop it, or serve this acceptor from the socket shell (ARTEMIS_PY_DATA_PLANE=0)",
            missing.join(", ")
        )));
    }
    provider.cipher_suites = chosen;
    Ok(provider)
}

/// The `ServerConfig` of a TLS listener.
pub fn server_config(spec: &TlsSpec) -> Result<Arc<ServerConfig>> {
    let mut versions = versions(spec)?;
    let provider = provider(spec)?;
    let has = |v: rustls::ProtocolVersion| {
        provider
            .cipher_suites
            .iter()
            .any(|s| s.version().version == v)
    };
    if !spec.cipher_suites.is_empty() && !has(rustls::ProtocolVersion::TLSv1_3) {
        // As in Java (and tls_contexts._limit): a list without a TLS 1.3 suite leaves
        // TLS 1.3 without one to use.
        versions.retain(|v| v.version != rustls::ProtocolVersion::TLSv1_3);
    }
    if !spec.cipher_suites.is_empty() && !has(rustls::ProtocolVersion::TLSv1_2) {
        versions.retain(|v| v.version != rustls::ProtocolVersion::TLSv1_2);
    }
    if versions.is_empty() {
        return Err(setting(
            "enabledProtocols and enabledCipherSuites have no protocol version in common",
        ));
    }
    let provider = Arc::new(provider);
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| setting(format!("enabledProtocols: {e}")))?;
    let builder = if spec.client_auth == ClientAuth::None {
        builder.with_no_client_auth()
    } else {
        let mut roots = RootCertStore::empty();
        for der in &spec.trust_anchors {
            roots
                .add(CertificateDer::from(der.clone()))
                .map_err(|e| setting(format!("trust store: a certificate cannot be used: {e}")))?;
        }
        if roots.is_empty() {
            return Err(setting(
                "needClientAuth/wantClientAuth: the trust store holds no certificate",
            ));
        }
        let mut verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
        if spec.client_auth == ClientAuth::Want {
            verifier = verifier.allow_unauthenticated();
        }
        let verifier = verifier
            .build()
            .map_err(|e| setting(format!("trust store: {e}")))?;
        builder.with_client_cert_verifier(verifier)
    };
    let chain = spec
        .cert_chain
        .iter()
        .map(|der| CertificateDer::from(der.clone()))
        .collect();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(spec.key.clone()));
    let config = builder
        .with_single_cert(chain, key)
        .map_err(|e| setting(format!("key store: {e}")))?;
    Ok(Arc::new(config))
}

/// Why a server-side handshake failed, in the words `tls_contexts.handshake_failure` logs
/// for the socket shell. `plain`: no TLS record had come yet (the bytes were not TLS).
pub(crate) fn failure_reason(error: &rustls::Error, plain: bool) -> String {
    use rustls::Error as E;
    match error {
        E::InvalidMessage(what) if plain => {
            format!("not a TLS handshake (the client sent plain text, {what:?}: a plain-TCP client on a TLS port?)")
        }
        E::NoCertificatesPresented => "the client sent no certificate (needClientAuth=true)".into(),
        E::InvalidCertificate(error) => {
            format!("client certificate refused: {}", certificate(error))
        }
        E::AlertReceived(alert) => format!("the client refused the handshake ({alert:?})"),
        E::PeerIncompatible(what) => {
            format!("no protocol version or cipher suite in common with the client ({what:?})")
        }
        other => other.to_string(),
    }
}

/// OpenSSL's words for the common refusals (what the socket shell logs), else rustls's.
fn certificate(error: &CertificateError) -> String {
    match error {
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => {
            "certificate has expired".into()
        }
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "certificate is not yet valid".into()
        }
        CertificateError::UnknownIssuer => "unable to get local issuer certificate".into(),
        other => other.to_string(),
    }
}
