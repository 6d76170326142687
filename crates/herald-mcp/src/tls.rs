//! The HTTP client of an HTTP or SSE server, with its TLS settings as Hermes reads
//! them: `ssl_verify` (the system's roots, none, or only a CA bundle's) and a client
//! certificate (`client_cert`, `client_key`: PEM files).

use herald_config::{McpTls, TlsVerify};
use std::path::Path;

/// Longest PEM file read (a bundle of every public CA is about 250 KiB).
const MAX_PEM: u64 = 4 << 20;

/// A client for `tls`; `follow_redirects` as the transport wants it.
pub fn client(tls: &McpTls, follow_redirects: bool) -> Result<reqwest::Client, String> {
    // reqwest is built without a default TLS provider: herald uses ring everywhere.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut b = reqwest::Client::builder();
    if !follow_redirects {
        b = b.redirect(reqwest::redirect::Policy::none());
    }
    b = match &tls.verify {
        TlsVerify::System => b,
        TlsVerify::Off => b.danger_accept_invalid_certs(true),
        TlsVerify::Ca(path) => {
            let pem = read_pem(path, "ssl_verify")?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| format!("ssl_verify {}: not a PEM bundle: {e}", path.display()))?;
            if certs.is_empty() {
                return Err(format!(
                    "ssl_verify {}: no certificate in it",
                    path.display()
                ));
            }
            b.tls_certs_only(certs)
        }
    };
    if let Some(cert) = &tls.client_cert {
        let mut pem = read_pem(cert, "client_cert")?;
        if let Some(key) = &tls.client_key {
            pem.push(b'\n');
            pem.extend(read_pem(key, "client_key")?);
        }
        let identity = reqwest::Identity::from_pem(&pem).map_err(|e| {
            format!(
                "client_cert {}: not a PEM certificate and key: {e}",
                cert.display()
            )
        })?;
        b = b.identity(identity);
    }
    b.build()
        .map_err(|e| format!("the HTTP client could not be built: {e}"))
}

fn read_pem(path: &Path, key: &str) -> Result<Vec<u8>, String> {
    let too_big = std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_PEM);
    if too_big {
        return Err(format!("{key} {}: over 4 MiB", path.display()));
    }
    std::fs::read(path).map_err(|e| format!("{key} {}: {e}", path.display()))
}
