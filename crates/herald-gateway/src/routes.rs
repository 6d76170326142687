//! The route table: config routes over subscriptions, swapped atomically when the
//! subscriptions file changes (mtime newer or older, size or inode changed).
//!
//! Every request checks for a change (spec §17). Where the home directory can be watched
//! (inotify), the check is a peek at the watch's queue and the file is `stat`ed only when
//! something happened in the directory, or when the last `stat` is over a second old
//! (for file systems whose changes the watch cannot see, such as NFS written from
//! another host). Elsewhere every request `stat`s the file.

use crate::dir_watch::DirWatch;
use herald_config::{Config, Route, RouteContext, load_subscriptions};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

/// With a watch, the file is still `stat`ed when the last look is older than this.
const STAT_AT_LEAST_EVERY: Duration = Duration::from_secs(1);

/// An immutable snapshot of every route, by name.
#[derive(Default)]
pub struct RouteTable {
    routes: HashMap<String, Arc<Route>, foldhash::fast::RandomState>,
}

impl RouteTable {
    pub fn get(&self, name: &str) -> Option<&Arc<Route>> {
        self.routes.get(name)
    }
    pub fn len(&self) -> usize {
        self.routes.len()
    }
    pub fn is_empty(&self) -> bool {
        self.routes.is_empty()
    }
    pub fn names(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.routes.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }
}

/// What identifies a version of the subscriptions file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStamp {
    modified: Option<std::time::SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &std::path::Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let inode = std::os::unix::fs::MetadataExt::ino(&meta);
    #[cfg(not(unix))]
    let inode = 0;
    Some(FileStamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode,
    })
}

/// Holds the current table and reloads subscriptions when their file changes.
pub struct RouteRegistry {
    static_routes: Vec<Arc<Route>>,
    global_secret: Option<String>,
    host: Option<String>,
    home: PathBuf,
    subscriptions_path: PathBuf,
    table: RwLock<Arc<RouteTable>>,
    /// The stamp of the file version loaded (None: no file).
    loaded: RwLock<Option<FileStamp>>,
    /// A watch on the file's directory, where one could be set.
    watch: Option<DirWatch>,
    /// When the file was last `stat`ed, as nanoseconds since `epoch`.
    stated_at: AtomicU64,
    epoch: Instant,
}

impl RouteRegistry {
    /// Builds the table from config and the subscriptions file as it is now.
    pub fn new(config: &Config) -> Self {
        let subscriptions_path = config.home.subscriptions_file();
        let watch = subscriptions_path.parent().and_then(DirWatch::new);
        let registry = RouteRegistry {
            static_routes: config.routes.iter().cloned().map(Arc::new).collect(),
            global_secret: config.webhook.secret.clone(),
            host: config.webhook.host.clone(),
            home: config.home.root().to_path_buf(),
            subscriptions_path,
            table: RwLock::new(Arc::new(RouteTable::default())),
            loaded: RwLock::new(None),
            watch,
            stated_at: AtomicU64::new(0),
            epoch: Instant::now(),
        };
        registry.reload(true);
        registry
    }

    /// The current table, reloading first if the subscriptions file changed.
    pub fn current(&self) -> Arc<RouteTable> {
        if self.may_have_changed() {
            self.reload(false);
        }
        match self.table.read() {
            Ok(t) => t.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Whether the file must be `stat`ed for this request.
    fn may_have_changed(&self) -> bool {
        let Some(watch) = &self.watch else {
            return true;
        };
        let now = self.epoch.elapsed().as_nanos() as u64;
        watch.pending()
            || now.saturating_sub(self.stated_at.load(Ordering::Relaxed))
                > STAT_AT_LEAST_EVERY.as_nanos() as u64
    }

    fn reload(&self, force: bool) {
        // Drained before the `stat`: a change after it is queued for the next request.
        let _drain = self.watch.as_ref().map(DirWatch::drain);
        self.stated_at
            .store(self.epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
        let now = stamp(&self.subscriptions_path);
        // Fast path: the file is as loaded (a shared lock, no contention between requests).
        if !force {
            let loaded = match self.loaded.read() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if *loaded == now {
                return;
            }
        }
        let mut loaded = match self.loaded.write() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        if !force && *loaded == now {
            return;
        }
        let static_names: Vec<&str> = self.static_routes.iter().map(|r| r.name.as_str()).collect();
        let ctx = RouteContext {
            global_secret: self.global_secret.as_deref(),
            host: self.host.as_deref(),
            home: &self.home,
        };
        let dynamic = match &now {
            None => Vec::new(),
            Some(_) => match load_subscriptions(&self.subscriptions_path, &static_names, &ctx) {
                Ok(subs) => {
                    for problem in &subs.skipped {
                        tracing::warn!("{problem}");
                    }
                    subs.routes
                }
                Err(e) => {
                    tracing::error!("{e}");
                    // Keep the previous routes, but do not re-read this version again.
                    *loaded = now;
                    return;
                }
            },
        };
        let mut routes: HashMap<String, Arc<Route>, _> = dynamic
            .into_iter()
            .map(|r| (r.name.clone(), Arc::new(r)))
            .collect();
        for r in &self.static_routes {
            routes.insert(r.name.clone(), r.clone());
        }
        let count = routes.len();
        let table = Arc::new(RouteTable { routes });
        match self.table.write() {
            Ok(mut t) => *t = table,
            Err(poisoned) => *poisoned.into_inner() = table,
        }
        if !force {
            tracing::info!(
                routes = count,
                "subscriptions file changed; routes reloaded"
            );
        }
        *loaded = now;
    }
}
