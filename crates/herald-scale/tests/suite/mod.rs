#![allow(clippy::unwrap_used, clippy::expect_used)]

mod inbox;
mod runs;
mod stall;
mod tls;

use herald_config::{PostgresSettings, SslMode};
use herald_test_support::postgres::PgCluster;
use std::sync::OnceLock;
use std::time::Duration;

/// The binary's one cluster, started on first use (stopped when the process ends).
pub fn cluster() -> &'static PgCluster {
    static CLUSTER: OnceLock<PgCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| match PgCluster::start() {
        Ok(c) => c,
        Err(why) => panic!("these tests need PostgreSQL: {why}"),
    })
}

/// Settings for database `db` of the cluster (created when missing).
pub fn settings(db: &str) -> PostgresSettings {
    let c = cluster();
    let _ = c.create_db(db);
    PostgresSettings {
        url: c.url(db),
        password: None,
        pool_size: 8,
        connect_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(5),
        sslmode: SslMode::Disable,
        sslrootcert: None,
    }
}

/// The default profile's session store of database `db`, as `instance`.
pub async fn sessions_of(db: &str, instance: &str) -> herald_store::SessionStore {
    let s = herald_scale::open_sessions(&settings(db), None, instance)
        .await
        .unwrap();
    let owner = s.owner().to_owned();
    herald_store::SessionStore::on(std::sync::Arc::new(s)).owned_by(&owner)
}
