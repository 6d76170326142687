//! `store:`, typed: where herald keeps its inbox, sessions and runs. Without it (and
//! without `HERALD_STORE_URL`), the SQLite files in the home; with a `postgres://` URL,
//! one PostgreSQL database that several herald instances share.

use crate::node::Node;
use crate::reader::Reader;
use std::path::PathBuf;
use std::time::Duration;

/// `store:`.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreSettings {
    pub backend: StoreBackend,
    /// `store.lease_seconds`: how long a claim holds an inbox entry before another
    /// instance may take it over (30; renewed every third of it while the work runs).
    pub lease: Duration,
}

impl Default for StoreSettings {
    fn default() -> Self {
        StoreSettings {
            backend: StoreBackend::Sqlite,
            lease: Duration::from_secs(30),
        }
    }
}

/// Where the store lives.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum StoreBackend {
    /// `herald.db` and `state.db` in the home (the default).
    #[default]
    Sqlite,
    Postgres(PostgresSettings),
}

/// `store.sslmode`, as libpq spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslMode {
    Disable,
    /// TLS when the server offers it (libpq's default).
    #[default]
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(text: &str) -> Option<SslMode> {
        Some(match text {
            "disable" => SslMode::Disable,
            "allow" | "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }
}

/// A PostgreSQL store.
#[derive(Clone, PartialEq)]
pub struct PostgresSettings {
    /// `store.url` (or `HERALD_STORE_URL`) as given, password included when it has one.
    pub url: String,
    /// `HERALD_STORE_PASSWORD`, used when the URL has no password.
    pub password: Option<String>,
    /// `store.pool_size`: connections per instance (16).
    pub pool_size: usize,
    /// `store.connect_timeout_seconds` (10).
    pub connect_timeout: Duration,
    /// `store.statement_timeout_seconds` (5): how long one store call may take before
    /// its caller hears that the store is unavailable (and PostgreSQL's own
    /// `statement_timeout` on the pool's connections).
    pub statement_timeout: Duration,
    /// `store.sslmode`, or `sslmode=` in the URL (prefer).
    pub sslmode: SslMode,
    /// `store.sslrootcert`, or `sslrootcert=` in the URL: the CA bundle that signs the
    /// server's certificate (else the system's roots).
    pub sslrootcert: Option<PathBuf>,
}

impl std::fmt::Debug for PostgresSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresSettings")
            .field("url", &self.display_url())
            .field("pool_size", &self.pool_size)
            .field("connect_timeout", &self.connect_timeout)
            .field("statement_timeout", &self.statement_timeout)
            .field("sslmode", &self.sslmode)
            .finish_non_exhaustive()
    }
}

impl PostgresSettings {
    /// The URL without its password, for messages and logs.
    pub fn display_url(&self) -> String {
        hide_password(&self.url)
    }
}

/// `postgres://user:secret@host/db` as `postgres://user:***@host/db`.
pub fn hide_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{tail}"),
            None => url.to_owned(),
        },
        None => url.to_owned(),
    }
}

/// `store.statement_timeout_seconds` when not set.
pub const DEFAULT_STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);

const KEYS: &[&str] = &[
    "url",
    "lease_seconds",
    "pool_size",
    "connect_timeout_seconds",
    "statement_timeout_seconds",
    "sslmode",
    "sslrootcert",
];

/// Reads `store:` and `HERALD_STORE_URL` / `HERALD_STORE_PASSWORD`; problems go to `r`.
pub fn read_store_settings(
    r: &mut Reader,
    doc: &Node,
    env: crate::config::EnvLookup<'_>,
) -> StoreSettings {
    let block = doc.get("store").filter(|n| !n.is_null());
    if let Some(b) = block {
        r.check_keys(b, "store", KEYS);
    }
    let at = |key: &str| block.and_then(|b| b.get(key)).filter(|n| !n.is_null());
    let mut lease = StoreSettings::default().lease;
    if let Some(n) = at("lease_seconds")
        && let Some(v) = r.int(n, "store.lease_seconds", 3, 3600)
    {
        lease = Duration::from_secs(u64::try_from(v).unwrap_or(30));
    }
    StoreSettings {
        backend: read_backend(r, block, env),
        lease,
    }
}

fn read_backend(
    r: &mut Reader,
    block: Option<&Node>,
    env: crate::config::EnvLookup<'_>,
) -> StoreBackend {
    let at = |key: &str| block.and_then(|b| b.get(key)).filter(|n| !n.is_null());
    let from_env = env("HERALD_STORE_URL").filter(|u| !u.trim().is_empty());
    let url = match (from_env, at("url")) {
        (Some(url), _) => Some(url.trim().to_owned()),
        (None, Some(n)) => r
            .string(n, "store.url")
            .flatten()
            .map(|s| s.trim().to_owned()),
        (None, None) => None,
    };
    let Some(url) = url.filter(|u| !u.is_empty()) else {
        return StoreBackend::Sqlite;
    };
    if let Err(why) = check_url(&url) {
        r.error(at("url"), "store.url", why);
        return StoreBackend::Sqlite;
    }
    let mut out = PostgresSettings {
        password: env("HERALD_STORE_PASSWORD").filter(|p| !p.is_empty()),
        pool_size: 16,
        connect_timeout: Duration::from_secs(10),
        statement_timeout: DEFAULT_STATEMENT_TIMEOUT,
        sslmode: SslMode::default(),
        sslrootcert: url_param(&url, "sslrootcert").map(PathBuf::from),
        url,
    };
    if let Some(mode) = url_param(&out.url, "sslmode") {
        match SslMode::parse(&mode) {
            Some(m) => out.sslmode = m,
            None => r.error(at("url"), "store.url", bad_sslmode(&mode)),
        }
    }
    if let Some(n) = at("pool_size")
        && let Some(v) = r.int(n, "store.pool_size", 1, 1024)
    {
        out.pool_size = usize::try_from(v).unwrap_or(16);
    }
    if let Some(n) = at("connect_timeout_seconds")
        && let Some(v) = r.int(n, "store.connect_timeout_seconds", 1, 600)
    {
        out.connect_timeout = Duration::from_secs(u64::try_from(v).unwrap_or(10));
    }
    if let Some(n) = at("statement_timeout_seconds")
        && let Some(v) = r.int(n, "store.statement_timeout_seconds", 1, 600)
    {
        out.statement_timeout = Duration::from_secs(u64::try_from(v).unwrap_or(5));
    }
    if let Some(n) = at("sslmode")
        && let Some(mode) = r.string(n, "store.sslmode").flatten()
    {
        match SslMode::parse(mode.trim()) {
            Some(m) => out.sslmode = m,
            None => r.error(Some(n), "store.sslmode", bad_sslmode(&mode)),
        }
    }
    if let Some(n) = at("sslrootcert")
        && let Some(path) = r.string(n, "store.sslrootcert").flatten()
    {
        out.sslrootcert = Some(PathBuf::from(path.trim()));
    }
    StoreBackend::Postgres(out)
}

fn bad_sslmode(mode: &str) -> String {
    format!("`{mode}` is not an sslmode: use disable, prefer, require, verify-ca or verify-full")
}

/// The shape herald needs of a store URL; the database checks the rest.
fn check_url(url: &str) -> Result<(), String> {
    let shown = hide_password(url);
    let Some(rest) = url
        .strip_prefix("postgres://")
        .or_else(|| url.strip_prefix("postgresql://"))
    else {
        return Err(format!(
            "`{shown}` is not a PostgreSQL URL: write postgres://USER[:PASSWORD]@HOST:PORT/DB (leave store.url out for SQLite in the home)"
        ));
    };
    let path_start = rest.find('/').unwrap_or(rest.len());
    let db = rest[path_start..].trim_start_matches('/');
    let db = db.split('?').next().unwrap_or_default();
    if db.is_empty() {
        return Err(format!(
            "`{shown}` names no database: end it with /DB, e.g. postgres://herald@db.internal:5432/herald"
        ));
    }
    Ok(())
}

/// A `?key=value` parameter of the URL.
fn url_param(url: &str, key: &str) -> Option<String> {
    let query = url.split_once('?')?.1;
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| v.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str, env: &[(&str, &str)]) -> (StoreBackend, Vec<String>) {
        let doc = Node::parse_yaml(yaml).expect("yaml");
        let mut r = Reader::new(std::path::Path::new("config.yaml"));
        let lookup = |k: &str| {
            env.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| (*v).to_owned())
        };
        let s = read_store_settings(&mut r, &doc, &lookup).backend;
        let problems = r
            .errors
            .iter()
            .chain(r.warnings.iter())
            .map(|p| p.to_string())
            .collect();
        (s, problems)
    }

    #[test]
    fn without_a_url_the_store_is_sqlite() {
        assert_eq!(read("model: x\n", &[]).0, StoreBackend::Sqlite);
        assert_eq!(read("store: {}\n", &[]).0, StoreBackend::Sqlite);
    }

    #[test]
    fn a_url_with_its_settings_and_the_environment() {
        let (s, problems) = read(
            "store:\n  url: postgres://herald@db:5432/herald?sslmode=require\n  pool_size: 4\n  connect_timeout_seconds: 3\n",
            &[("HERALD_STORE_PASSWORD", "pw")],
        );
        assert!(problems.is_empty(), "{problems:?}");
        let StoreBackend::Postgres(p) = s else {
            panic!("not postgres")
        };
        assert_eq!(p.pool_size, 4);
        assert_eq!(p.connect_timeout, Duration::from_secs(3));
        assert_eq!(p.statement_timeout, DEFAULT_STATEMENT_TIMEOUT);
        assert_eq!(p.sslmode, SslMode::Require);
        assert_eq!(p.password.as_deref(), Some("pw"));
        let (s, _) = read(
            "store:\n  url: postgres://a/b\n",
            &[("HERALD_STORE_URL", "postgresql://u:secret@h/other")],
        );
        let StoreBackend::Postgres(p) = s else {
            panic!("not postgres")
        };
        assert_eq!(p.url, "postgresql://u:secret@h/other");
        assert_eq!(p.display_url(), "postgresql://u:***@h/other");
        assert!(!format!("{p:?}").contains("secret"));
    }

    #[test]
    fn bad_urls_and_values_are_errors_that_say_what_to_write() {
        let (_, problems) = read("store:\n  url: mysql://x/y\n", &[]);
        assert!(
            problems.iter().any(|p| p.contains("postgres://USER")),
            "{problems:?}"
        );
        let (_, problems) = read("store:\n  url: postgres://u:pw@host:5432\n", &[]);
        assert!(problems.iter().any(|p| p.contains("names no database")));
        assert!(!problems.iter().any(|p| p.contains("pw@")));
        let (_, problems) = read(
            "store:\n  url: postgres://h/d\n  sslmode: sometimes\n  pool_size: 0\n  poolsize: 3\n",
            &[],
        );
        assert!(problems.iter().any(|p| p.contains("not an sslmode")));
        assert!(problems.iter().any(|p| p.contains("store.pool_size")));
        assert!(problems.iter().any(|p| p.contains("poolsize")));
    }

    #[test]
    fn the_statement_timeout_is_whole_seconds_from_1_to_600() {
        let (s, problems) = read(
            "store:\n  url: postgres://h/d\n  statement_timeout_seconds: 2\n",
            &[],
        );
        assert!(problems.is_empty(), "{problems:?}");
        let StoreBackend::Postgres(p) = s else {
            panic!("not postgres")
        };
        assert_eq!(p.statement_timeout, Duration::from_secs(2));
        for bad in ["0", "601", "-3", "1.5", "soon", "[5]"] {
            let (_, problems) = read(
                &format!("store:\n  url: postgres://h/d\n  statement_timeout_seconds: {bad}\n"),
                &[],
            );
            assert!(
                problems
                    .iter()
                    .any(|p| p.contains("store.statement_timeout_seconds")),
                "{bad}: {problems:?}"
            );
        }
    }
}
