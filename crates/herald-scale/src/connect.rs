//! From `store:` settings to a pool of connections: the URL as tokio-postgres reads
//! it (less the TLS keys herald reads itself), the password from the environment when
//! the URL has none, `synchronous_commit` on for every session, TCP keepalives and a
//! `tcp_user_timeout` on every connection (a dead peer or a black-holed path closes it
//! instead of holding it for the kernel's retries, about 15 minutes),
//! `statement_timeout` on the pool's, and TLS over rustls.

use crate::ScaleError;
use crate::deadline::Deadline;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use herald_config::{PostgresSettings, SslMode};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::config::SslMode as PgSslMode;

/// Longest CA bundle read.
const MAX_PEM: u64 = 4 << 20;

/// An idle connection is probed after this long, then every interval, and given up
/// after that many unanswered probes (a dead peer found within 30 s).
const KEEPALIVE_IDLE: Duration = Duration::from_secs(15);
const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
const KEEPALIVE_RETRIES: u32 = 3;
/// Data sent and not acknowledged for this long closes the connection.
const TCP_USER_TIMEOUT: Duration = Duration::from_secs(20);

/// The connection settings and the TLS connector of `settings`.
pub(crate) struct Target {
    pub config: tokio_postgres::Config,
    pub tls: tokio_postgres_rustls::MakeRustlsConnect,
    pub shown: String,
    /// The longest one store call may take (`store.statement_timeout_seconds`).
    pub deadline: Deadline,
}

impl Target {
    pub(crate) fn of(settings: &PostgresSettings) -> Result<Target, ScaleError> {
        let shown = settings.display_url();
        let url = without_params(&settings.url, &["sslmode", "sslrootcert"]);
        let mut config = tokio_postgres::Config::from_str(&url)
            .map_err(|e| ScaleError::Config(format!("store.url `{shown}`: {e}")))?;
        if config.get_password().is_none()
            && let Some(pw) = &settings.password
        {
            config.password(pw.as_bytes());
        }
        if config.get_user().is_none() {
            config.user("herald");
        }
        config.connect_timeout(settings.connect_timeout);
        config.keepalives(true);
        config.keepalives_idle(KEEPALIVE_IDLE);
        config.keepalives_interval(KEEPALIVE_INTERVAL);
        config.keepalives_retries(KEEPALIVE_RETRIES);
        config.tcp_user_timeout(TCP_USER_TIMEOUT);
        config.application_name("herald");
        config.options("-c synchronous_commit=on");
        config.ssl_mode(match settings.sslmode {
            SslMode::Disable => PgSslMode::Disable,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
        });
        let tls = tls_connector(settings)?;
        Ok(Target {
            config,
            tls,
            shown,
            deadline: Deadline::new(settings.statement_timeout),
        })
    }

    /// The same database with `schema` first on the search path (a profile's
    /// sessions); `schema` is a plain identifier.
    pub(crate) fn in_schema(&self, schema: &str) -> Target {
        let mut config = self.config.clone();
        config.options(format!("-c synchronous_commit=on -c search_path={schema}"));
        Target {
            config,
            tls: self.tls.clone(),
            shown: format!("{} (schema {schema})", self.shown),
            deadline: self.deadline,
        }
    }

    /// One connection outside the pool, its driver running on a task of its own.
    pub(crate) async fn connect_one(&self) -> Result<tokio_postgres::Client, ScaleError> {
        let (client, conn) = self
            .config
            .connect(self.tls.clone())
            .await
            .map_err(|e| ScaleError::connect(&self.shown, &e))?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "store connection ended");
            }
        });
        Ok(client)
    }

    /// The pool that serves requests: its connections cancel a statement past the
    /// deadline on the server's side too (migrations and `store migrate` use
    /// connections of their own, without that limit).
    pub(crate) fn pool(&self, size: usize) -> Result<Pool, ScaleError> {
        let mut config = self.config.clone();
        let options = format!(
            "{} -c statement_timeout={}",
            config.get_options().unwrap_or_default(),
            self.deadline.limit().as_millis()
        );
        config.options(options.trim_start());
        let manager = Manager::from_config(
            config,
            self.tls.clone(),
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        Pool::builder(manager)
            .max_size(size)
            .wait_timeout(Some(std::time::Duration::from_secs(30)))
            .create_timeout(self.config.get_connect_timeout().copied())
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| ScaleError::Config(format!("store pool: {e}")))
    }
}

/// The URL with the named `?key=value` parameters left out.
fn without_params(url: &str, keys: &[&str]) -> String {
    let Some((base, query)) = url.split_once('?') else {
        return url.to_owned();
    };
    let kept: Vec<&str> = query
        .split('&')
        .filter(|pair| {
            let key = pair.split('=').next().unwrap_or_default();
            !keys.contains(&key)
        })
        .collect();
    if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    }
}

/// rustls with the CA bundle of `sslrootcert`, else the public web's roots. Every
/// TLS connection verifies the server's certificate and name: `require` and
/// `verify-ca` are as strict as `verify-full` (stricter than libpq, which lets
/// `require` skip verification).
fn tls_connector(
    settings: &PostgresSettings,
) -> Result<tokio_postgres_rustls::MakeRustlsConnect, ScaleError> {
    let mut roots = rustls::RootCertStore::empty();
    match &settings.sslrootcert {
        Some(path) => {
            use rustls::pki_types::CertificateDer;
            use rustls::pki_types::pem::PemObject;
            let too_big = std::fs::metadata(path).is_ok_and(|m| m.len() > MAX_PEM);
            let pem = if too_big {
                Err("over 4 MiB".to_owned())
            } else {
                std::fs::read(path).map_err(|e| e.to_string())
            }
            .map_err(|e| {
                ScaleError::Config(format!("store.sslrootcert {}: {e}", path.display()))
            })?;
            for cert in CertificateDer::pem_slice_iter(&pem) {
                let cert = cert.map_err(|e| {
                    ScaleError::Config(format!("store.sslrootcert {}: {e}", path.display()))
                })?;
                roots.add(cert).map_err(|e| {
                    ScaleError::Config(format!("store.sslrootcert {}: {e}", path.display()))
                })?;
            }
            if roots.is_empty() {
                return Err(ScaleError::Config(format!(
                    "store.sslrootcert {}: no certificate in it",
                    path.display()
                )));
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ScaleError::Config(format!("store TLS: {e}")))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(tokio_postgres_rustls::MakeRustlsConnect::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn herald_s_own_parameters_are_taken_out_of_the_url() {
        assert_eq!(
            without_params(
                "postgres://h/d?sslmode=require&application_name=x",
                &["sslmode"]
            ),
            "postgres://h/d?application_name=x"
        );
        assert_eq!(
            without_params(
                "postgres://h/d?sslmode=require&sslrootcert=/c",
                &["sslmode", "sslrootcert"]
            ),
            "postgres://h/d"
        );
        assert_eq!(
            without_params("postgres://h/d", &["sslmode"]),
            "postgres://h/d"
        );
    }
}
