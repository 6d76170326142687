//! `herald store migrate --from-sqlite` of the real binary into a throwaway PostgreSQL:
//! large payloads copied byte for byte within bounded memory, and the SQLite source
//! read without a byte of it changed, whatever its schema; a damaged one refused.

use super::scale::{cluster, database};
use super::support::*;
use herald_store::{InboxBackend, NewInboxItem, SqliteInbox};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

fn hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A home whose config names `url` as its store (and nothing else).
fn home_on(url: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    std::fs::write(
        home.path().join("config.yaml"),
        format!("store:\n  url: {url}\n"),
    )
    .unwrap();
    home
}

/// `n` characters no compressor shrinks (a xorshift over 62 letters and digits).
fn noise(n: usize, seed: u64) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

fn item(n: usize, payload: String) -> NewInboxItem {
    NewInboxItem {
        route: "r".into(),
        event_type: "push".into(),
        delivery_id: format!("d-{n}"),
        received_at_ms: herald_store::now_ms(),
        profile: None,
        headers: "{}".into(),
        payload,
        prompt: format!("event {n}"),
        deliver: "log".into(),
        deliver_extra: "{}".into(),
        skills: "[]".into(),
        toolsets: None,
    }
}

/// Fills `home`'s herald.db with one entry per payload.
async fn inbox_with(home: &Path, payloads: &[String]) {
    let db = home.join("herald.db");
    let inbox = SqliteInbox::open(&db).unwrap();
    for (n, p) in payloads.iter().enumerate() {
        inbox.enqueue(item(n, p.clone())).await.unwrap();
    }
    drop(inbox);
    closed(&db);
}

/// Waits until the store's writer thread has closed `db` (its log folded in and gone),
/// as a stopped gateway leaves it.
fn closed(db: &Path) {
    let mut wal = db.as_os_str().to_owned();
    wal.push("-wal");
    let started = Instant::now();
    while Path::new(&wal).exists() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "{} stays",
            db.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Runs `herald store migrate --from-sqlite` on `home`; its exit code, stdout,
/// stderr and peak resident memory (VmHWM, read while it runs), in bytes.
fn migrate_measured(home: &Path) -> (i32, String, String, u64) {
    let mut child = Command::new(BIN)
        .args(["store", "migrate", "--from-sqlite"])
        .env("HERALD_HOME", home)
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let status_file = format!("/proc/{}/status", child.id());
    let (mut out, mut err) = (child.stdout.take().unwrap(), child.stderr.take().unwrap());
    let out = std::thread::spawn(move || std::io::read_to_string(&mut out).unwrap());
    let err = std::thread::spawn(move || std::io::read_to_string(&mut err).unwrap());
    let mut peak_kb = 0;
    let started = Instant::now();
    let code = loop {
        if let Ok(status) = std::fs::read_to_string(&status_file)
            && let Some(kb) = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        {
            peak_kb = peak_kb.max(kb);
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status.code().unwrap_or(-1);
        }
        assert!(
            started.elapsed() < Duration::from_secs(600),
            "migrate hangs"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    (
        code,
        out.join().unwrap(),
        err.join().unwrap(),
        peak_kb * 1024,
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_payloads_are_copied_byte_for_byte_within_bounded_memory() {
    // HERALD_TEST_MIGRATE_ENTRIES measures more (the red team copied 600).
    let entries: usize = std::env::var("HERALD_TEST_MIGRATE_ENTRIES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    const PAYLOAD: usize = 2_500_000;
    let url = database("large_payloads");
    let home = home_on(&url);
    let payloads: Vec<String> = (0..entries).map(|n| noise(PAYLOAD, n as u64 + 7)).collect();
    inbox_with(home.path(), &payloads).await;
    let (code, out, err, peak) = migrate_measured(home.path());
    assert_eq!(code, 0, "{out}{err}");
    eprintln!(
        "migrate of {entries} entries of {PAYLOAD} bytes: peak RSS {} MiB",
        peak >> 20
    );
    assert!(
        err.contains(&format!("inbox: {entries}/{entries} rows")),
        "{err}"
    );
    let copied = cluster()
        .psql(
            "large_payloads",
            "SELECT payload_packed, encode(sha256(payload), 'hex') FROM inbox ORDER BY id",
        )
        .unwrap();
    let want: Vec<String> = payloads
        .iter()
        .map(|p| format!("f|{}", hex(p.as_bytes())))
        .collect();
    assert_eq!(copied.lines().collect::<Vec<_>>(), want, "byte for byte");
    assert!(peak > 0, "VmHWM was never read");
    assert!(peak < 300 << 20, "peak RSS {} MiB", peak >> 20);
    // Again: nothing copied twice.
    let (code, out, err, _) = migrate_measured(home.path());
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(
        cluster()
            .psql("large_payloads", "SELECT count(*) FROM inbox")
            .unwrap(),
        entries.to_string()
    );
}

/// What a database file and its companions look like: for each of the file, `-wal`
/// and `-shm`, its digest and modification time when it exists.
fn snapshot(db: &Path) -> Vec<(String, Option<(String, SystemTime)>)> {
    ["", "-wal", "-shm", "-journal"]
        .iter()
        .map(|suffix| {
            let mut name = db.as_os_str().to_owned();
            name.push(suffix);
            let seen = std::fs::read(&name).ok().map(|bytes| {
                let mtime = std::fs::metadata(&name).unwrap().modified().unwrap();
                (hex(&bytes), mtime)
            });
            (suffix.to_string(), seen)
        })
        .collect()
}

/// A home with an inbox of three entries and a session store with one session, both
/// of this build's schema.
async fn sqlite_home(url: &str) -> tempfile::TempDir {
    let home = home_on(url);
    inbox_with(
        home.path(),
        &["{\"a\":1}".into(), "{\"a\":2}".into(), "{\"a\":3}".into()],
    )
    .await;
    let state = herald_store::SessionStore::open(&home.path().join("state.db")).unwrap();
    state
        .create_session(herald_store::sessions::NewSession {
            id: "s1".into(),
            source: "api_server".into(),
            model: "m".into(),
            system_prompt: "sys".into(),
            cwd: "/".into(),
            parent_session_id: None,
            session_key: None,
        })
        .await
        .unwrap();
    state
        .create_session(herald_store::sessions::NewSession {
            id: "s2".into(),
            source: "subagent".into(),
            model: "m".into(),
            system_prompt: "sys".into(),
            cwd: "/".into(),
            parent_session_id: Some("s1".into()),
            session_key: None,
        })
        .await
        .unwrap();
    drop(state);
    closed(&home.path().join("state.db"));
    home
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_source_is_read_without_a_byte_of_it_changed_whatever_its_schema() {
    for (name, old) in [("source_current", false), ("source_old", true)] {
        let url = database(name);
        let home = sqlite_home(&url).await;
        let (inbox, state) = (home.path().join("herald.db"), home.path().join("state.db"));
        if old {
            // An earlier build's files: before the search index and the runs' owner.
            let c = rusqlite::Connection::open(&inbox).unwrap();
            c.execute_batch(
                "DROP TABLE inbox_fts; DROP TABLE inbox_fts_state; PRAGMA user_version = 5;",
            )
            .unwrap();
            drop(c);
            let c = rusqlite::Connection::open(&state).unwrap();
            c.execute_batch("ALTER TABLE herald_runs DROP COLUMN owner; PRAGMA user_version = 3;")
                .unwrap();
            drop(c);
        }
        // Let the clock move, so a write would show in the modification times.
        std::thread::sleep(Duration::from_millis(20));
        let before = (snapshot(&inbox), snapshot(&state));
        let (code, out, err) = run_cli(home.path(), &["store", "migrate", "--from-sqlite"]);
        assert_eq!(code, 0, "{name}: {out}{err}");
        assert_eq!(
            (snapshot(&inbox), snapshot(&state)),
            before,
            "{name}: {out}{err}"
        );
        assert!(out.contains("left as they were"), "{out}");
        assert_eq!(
            out.contains("older than this herald"),
            old,
            "{name} says whether it read a migrated copy: {out}"
        );
        let pg = |sql: &str| cluster().psql(name, sql).unwrap();
        assert_eq!(pg("SELECT count(*) FROM inbox"), "3", "{name}");
        assert_eq!(
            pg(
                "SELECT string_agg(id || '<' || COALESCE(parent_session_id, '-'), ',' ORDER BY id) FROM sessions"
            ),
            "s1<-,s2<s1",
            "{name}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_source_is_refused_and_left_as_it_was() {
    let url = database("source_damaged");
    // An empty file, and a store with a page overwritten.
    let empty = home_on(&url);
    std::fs::write(empty.path().join("herald.db"), b"").unwrap();
    let broken = sqlite_home(&url).await;
    let db = broken.path().join("herald.db");
    let mut bytes = std::fs::read(&db).unwrap();
    assert!(bytes.len() > 3 * 4096, "{}", bytes.len());
    for b in &mut bytes[2 * 4096..3 * 4096] {
        *b = 0xa5;
    }
    std::fs::write(&db, &bytes).unwrap();
    for (home, why) in [
        (empty.path(), "not a herald inbox"),
        (broken.path(), "damaged"),
    ] {
        let db = home.join("herald.db");
        std::thread::sleep(Duration::from_millis(20));
        let before = snapshot(&db);
        let (code, out, err) = run_cli(home, &["store", "migrate", "--from-sqlite"]);
        assert_ne!(code, 0, "{out}{err}");
        assert!(err.contains(why) && err.contains("herald.db"), "{err}");
        assert!(!out.contains("left as they were"), "{out}");
        assert_eq!(snapshot(&db), before, "{err}");
    }
}
