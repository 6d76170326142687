//! The route table: config routes over subscriptions, swapped atomically when the
//! subscriptions file changes (mtime newer or older, size or inode changed).

use herald_config::{Config, Route, RouteContext, load_subscriptions};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};

/// An immutable snapshot of every route, by name.
#[derive(Default)]
pub struct RouteTable {
    routes: HashMap<String, Arc<Route>>,
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
}

impl RouteRegistry {
    /// Builds the table from config and the subscriptions file as it is now.
    pub fn new(config: &Config) -> Self {
        let registry = RouteRegistry {
            static_routes: config.routes.iter().cloned().map(Arc::new).collect(),
            global_secret: config.webhook.secret.clone(),
            host: config.webhook.host.clone(),
            home: config.home.root().to_path_buf(),
            subscriptions_path: config.home.subscriptions_file(),
            table: RwLock::new(Arc::new(RouteTable::default())),
            loaded: RwLock::new(None),
        };
        registry.reload(true);
        registry
    }

    /// The current table, reloading first if the subscriptions file changed.
    pub fn current(&self) -> Arc<RouteTable> {
        self.reload(false);
        match self.table.read() {
            Ok(t) => t.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn reload(&self, force: bool) {
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
        let mut routes: HashMap<String, Arc<Route>> = dynamic
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
