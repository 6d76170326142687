//! A throwaway PostgreSQL cluster for tests: `initdb` into a temporary folder, then
//! `pg_ctl` on a free port of 127.0.0.1 with its socket in that folder, run as the
//! `postgres` user when this process is root (PostgreSQL refuses root). Stopped and
//! removed when dropped. Without Debian's `postgresql` package it fails and says what
//! to install: a test that needs it never passes silently.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The superuser of every throwaway cluster, and its password (TCP logins use
/// scram-sha-256; the socket trusts).
pub const USER: &str = "herald";
pub const PASSWORD: &str = "herald-test-password";

/// A running throwaway cluster.
pub struct PgCluster {
    dir: PathBuf,
    bin: PathBuf,
    pub port: u16,
    as_postgres: bool,
    /// Server options beyond the defaults (TLS).
    extra: String,
}

impl PgCluster {
    /// Starts a new cluster, or says why it cannot.
    pub fn start() -> Result<PgCluster, String> {
        PgCluster::start_with(None)
    }

    /// Starts a new cluster serving TLS with this PEM certificate and key (copied into
    /// its folder).
    pub fn start_tls(cert: &Path, key: &Path) -> Result<PgCluster, String> {
        PgCluster::start_with(Some((cert, key)))
    }

    fn start_with(tls: Option<(&Path, &Path)>) -> Result<PgCluster, String> {
        let bin = find_bin()?;
        let as_postgres = is_root();
        let dir = std::env::temp_dir().join(format!(
            "herald-pg-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let pwfile = dir.join("pw");
        std::fs::write(&pwfile, PASSWORD).map_err(|e| e.to_string())?;
        let mut extra = String::new();
        if let Some((cert, key)) = tls {
            let (c, k) = (dir.join("server.crt"), dir.join("server.key"));
            std::fs::copy(cert, &c).map_err(|e| format!("{}: {e}", cert.display()))?;
            std::fs::copy(key, &k).map_err(|e| format!("{}: {e}", key.display()))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                let _ = std::fs::set_permissions(&k, std::fs::Permissions::from_mode(0o600));
            }
            extra = format!(
                " -c ssl=on -c ssl_cert_file={} -c ssl_key_file={}",
                c.display(),
                k.display()
            );
        }
        if as_postgres {
            let chown = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(&dir)
                .status()
                .map_err(|e| format!("chown: {e}"))?;
            if !chown.success() {
                return Err(format!(
                    "cannot give {} to the postgres user",
                    dir.display()
                ));
            }
        }
        let mut cluster = PgCluster {
            dir,
            bin,
            port: 0,
            as_postgres,
            extra,
        };
        cluster.init(&pwfile)?;
        cluster.port = free_port()?;
        cluster.run_ctl()?;
        cluster.watch();
        Ok(cluster)
    }

    /// A cluster kept in a static is never dropped: a watchdog stops and removes it
    /// once this process is gone, however it ended.
    fn watch(&self) {
        let stop = format!(
            "{runas}{ctl} -D {data} -m immediate -w stop >/dev/null 2>&1; rm -rf {dir}",
            runas = if self.as_postgres {
                "runuser -u postgres -- "
            } else {
                ""
            },
            ctl = self.bin.join("pg_ctl").display(),
            data = self.data().display(),
            dir = self.dir.display(),
        );
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; {stop}",
            pid = std::process::id()
        );
        let _ = Command::new("sh")
            .args(["-c", &script])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
    }

    fn command(&self, tool: &str) -> Command {
        let path = self.bin.join(tool);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(path);
            c
        } else {
            Command::new(path)
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.join("data")
    }

    fn init(&self, pwfile: &Path) -> Result<(), String> {
        let out = self
            .command("initdb")
            .arg("-D")
            .arg(self.data())
            .args([
                "-U",
                USER,
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
            ])
            .arg(format!("--pwfile={}", pwfile.display()))
            .args(["-E", "UTF8", "--locale=C.UTF-8", "--no-sync"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("initdb: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    fn run_ctl(&self) -> Result<(), String> {
        let options = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=on -c max_connections=200{}",
            self.port,
            self.dir.display(),
            self.extra
        );
        let out = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .arg("-l")
            .arg(self.dir.join("log"))
            .args(["-o", &options, "-w", "-t", "60", "start"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("pg_ctl: {e}"))?;
        if !out.status.success() {
            let log = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
            return Err(format!(
                "pg_ctl start failed: {}{log}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    /// A URL of database `db` for the superuser over TCP, with the password.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://{USER}:{PASSWORD}@127.0.0.1:{}/{db}", self.port)
    }

    /// Runs SQL through `psql` on the socket (as the superuser); returns its output.
    pub fn psql(&self, db: &str, sql: &str) -> Result<String, String> {
        let out = self
            .command("psql")
            .args(["-h"])
            .arg(&self.dir)
            .args(["-p", &self.port.to_string(), "-U", USER, "-d", db])
            .args(["-v", "ON_ERROR_STOP=1", "-At", "-c", sql])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
    }

    /// Freezes the server: SIGSTOP to the postmaster and every one of its processes
    /// (connections stay open and the kernel still acknowledges what is sent, as with
    /// a server that hangs). [`PgCluster::thaw`] lets it go on.
    pub fn freeze(&self) -> Result<(), String> {
        // The postmaster first, so that it forks no child the list below would miss
        // (a connection opening just then), then every child.
        let pids = self.processes()?;
        signal("-STOP", &pids[..1])?;
        children("-STOP", &self.processes()?);
        Ok(())
    }

    /// Lets a frozen server go on (SIGCONT to the same processes).
    pub fn thaw(&self) -> Result<(), String> {
        let pids = self.processes()?;
        children("-CONT", &pids);
        signal("-CONT", &pids[..1])
    }

    /// The postmaster's pid (first) and its children's.
    fn processes(&self) -> Result<Vec<u32>, String> {
        let file = self.data().join("postmaster.pid");
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let postmaster: u32 = text
            .lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| format!("{}: no pid in it", file.display()))?;
        let mut pids = vec![postmaster];
        for entry in std::fs::read_dir("/proc")
            .map_err(|e| e.to_string())?
            .flatten()
        {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ppid ...: comm may hold spaces, so read after its `)`.
            let parent = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1))
                .and_then(|p| p.parse::<u32>().ok());
            if parent == Some(postmaster) {
                pids.push(pid);
            }
        }
        Ok(pids)
    }

    /// Creates an empty database.
    pub fn create_db(&self, name: &str) -> Result<(), String> {
        self.psql("postgres", &format!("CREATE DATABASE \"{name}\""))
            .map(|_| ())
    }
}

impl Drop for PgCluster {
    fn drop(&mut self) {
        // A test that failed while the server was frozen leaves it stopped.
        let _ = self.thaw();
        let _ = self
            .command("pg_ctl")
            .arg("-D")
            .arg(self.data())
            .args(["-m", "immediate", "-w", "stop"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Sends `kill`'s `signal` to `pids`.
/// Signals the children listed after the postmaster, each on its own: one that ended
/// since it was listed is no failure.
fn children(sig: &str, pids: &[u32]) {
    for pid in pids.iter().skip(1) {
        let _ = signal(sig, &[*pid]);
    }
}

fn signal(signal: &str, pids: &[u32]) -> Result<(), String> {
    let status = Command::new("kill")
        .arg(signal)
        .args(pids.iter().map(u32::to_string))
        .stdin(Stdio::null())
        .status()
        .map_err(|e| format!("kill: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill {signal} {pids:?} failed"))
    }
}

static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The newest installed PostgreSQL's programs.
fn find_bin() -> Result<PathBuf, String> {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_string_lossy().parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("pg_ctl").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).ok_or_else(|| {
        "PostgreSQL is not installed: this test needs Debian's `postgresql` package \
         (apt-get install postgresql; scripts/test installs it)"
            .to_owned()
    })
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}
