//! TLS to the store, against a cluster serving a certificate of a throwaway CA
//! (openssl makes both; scripts/test installs it when missing).

use herald_config::{PostgresSettings, SslMode};
use herald_test_support::postgres::PgCluster;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("openssl is needed (scripts/test installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA, a server certificate it signs for `localhost`, and an unrelated CA.
fn certificates(dir: &Path) -> (PathBuf, PathBuf, PathBuf, PathBuf) {
    let key = |name: &str| ["-newkey", "rsa:2048", "-nodes", "-keyout", name].map(str::to_owned);
    let mut ca: Vec<String> = [
        "req",
        "-x509",
        "-days",
        "2",
        "-subj",
        "/CN=herald-test-ca",
        "-out",
        "ca.crt",
    ]
    .map(str::to_owned)
    .to_vec();
    ca.extend(key("ca.key"));
    openssl(dir, &ca.iter().map(String::as_str).collect::<Vec<_>>());
    let mut other: Vec<String> = [
        "req",
        "-x509",
        "-days",
        "2",
        "-subj",
        "/CN=another-ca",
        "-out",
        "other.crt",
    ]
    .map(str::to_owned)
    .to_vec();
    other.extend(key("other.key"));
    openssl(dir, &other.iter().map(String::as_str).collect::<Vec<_>>());
    let mut csr: Vec<String> = ["req", "-subj", "/CN=localhost", "-out", "server.csr"]
        .map(str::to_owned)
        .to_vec();
    csr.extend(key("server.key"));
    openssl(dir, &csr.iter().map(String::as_str).collect::<Vec<_>>());
    std::fs::write(
        dir.join("ext.cnf"),
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
            "-out",
            "server.crt",
        ],
    );
    (
        dir.join("ca.crt"),
        dir.join("other.crt"),
        dir.join("server.crt"),
        dir.join("server.key"),
    )
}

fn settings(port: u16, host: &str, mode: SslMode, root: Option<&Path>) -> PostgresSettings {
    PostgresSettings {
        url: format!(
            "postgres://{}:{}@{host}:{port}/postgres",
            herald_test_support::postgres::USER,
            herald_test_support::postgres::PASSWORD
        ),
        password: None,
        pool_size: 2,
        connect_timeout: Duration::from_secs(5),
        statement_timeout: Duration::from_secs(5),
        sslmode: mode,
        sslrootcert: root.map(Path::to_path_buf),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_verifies_the_server_s_certificate_and_name() {
    let dir = tempfile::tempdir().unwrap();
    let (ca, other, cert, key) = certificates(dir.path());
    let cluster = match PgCluster::start_tls(&cert, &key) {
        Ok(c) => c,
        Err(why) => panic!("these tests need PostgreSQL: {why}"),
    };
    let port = cluster.port;
    // The CA that signed the server's certificate: verified.
    herald_scale::check(&settings(port, "localhost", SslMode::VerifyFull, Some(&ca)))
        .await
        .unwrap();
    // Another CA, a name the certificate lacks, `require` without the CA: refused.
    for (host, mode, root, why) in [
        (
            "localhost",
            SslMode::VerifyFull,
            Some(other.as_path()),
            "UnknownIssuer",
        ),
        (
            "127.0.0.1",
            SslMode::VerifyFull,
            Some(ca.as_path()),
            "not valid for name",
        ),
        ("localhost", SslMode::Require, None, "UnknownIssuer"),
    ] {
        let e = herald_scale::check(&settings(port, host, mode, root))
            .await
            .unwrap_err()
            .to_string();
        assert!(e.contains(why), "{host} {mode:?}: {e}");
        assert!(!e.contains(herald_test_support::postgres::PASSWORD), "{e}");
    }
    // A CA bundle that is not one: a clear error before any connection.
    std::fs::write(dir.path().join("junk.pem"), "not a certificate").unwrap();
    let junk = dir.path().join("junk.pem");
    let e = herald_scale::check(&settings(
        port,
        "localhost",
        SslMode::VerifyFull,
        Some(&junk),
    ))
    .await
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("sslrootcert") && e.contains("no certificate"),
        "{e}"
    );
}
