//! The delivery targets a running gateway sends to. They are built from config.yaml's
//! platform blocks and `.env` at start, and built again by a reload (SIGHUP, which
//! `herald gateway reload` sends), so a token added to `.env` is used without a restart.

use herald_config::{Config, ConfigError, Home, process_env};
use herald_deliver::{Target, TargetSet, TargetSettings};
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

/// The targets in use, and `.env` as it was when they were built.
pub struct LiveTargets {
    current: RwLock<Arc<TargetSet>>,
    env_file: PathBuf,
    /// `.env`'s modification time when the targets were last built.
    built_from: RwLock<Option<SystemTime>>,
}

impl LiveTargets {
    pub fn new(targets: TargetSet, env_file: PathBuf) -> LiveTargets {
        let built_from = RwLock::new(modified(&env_file));
        LiveTargets {
            current: RwLock::new(Arc::new(targets)),
            env_file,
            built_from,
        }
    }

    /// The targets as they are now.
    pub fn current(&self) -> Arc<TargetSet> {
        match self.current.read() {
            Ok(t) => t.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// The target for a route's `deliver`, or why there is none; when `.env` changed
    /// after the targets were built, the reason says how to use the change.
    pub fn get(&self, deliver: &str) -> Result<Arc<dyn Target>, String> {
        self.current().get(deliver).map_err(|why| self.explain(why))
    }

    fn explain(&self, why: String) -> String {
        let built_from = match self.built_from.read() {
            Ok(t) => *t,
            Err(poisoned) => *poisoned.into_inner(),
        };
        if modified(&self.env_file) == built_from {
            return why;
        }
        format!(
            "{why}; {} changed after the delivery targets were read: `herald gateway reload` (SIGHUP) reads it again",
            self.env_file.display()
        )
    }

    /// Uses `targets` from now on (a send already started keeps its target).
    pub fn replace(&self, targets: TargetSet) {
        let stamp = modified(&self.env_file);
        match self.current.write() {
            Ok(mut t) => *t = Arc::new(targets),
            Err(poisoned) => *poisoned.into_inner() = Arc::new(targets),
        }
        match self.built_from.write() {
            Ok(mut t) => *t = stamp,
            Err(poisoned) => *poisoned.into_inner() = stamp,
        }
    }

    /// Reads `.env` and config.yaml again and rebuilds the targets from them (blocking
    /// file reads: call it off the async workers). The names of the enabled targets.
    pub fn reload(&self, home: &Home) -> Result<Vec<String>, ConfigError> {
        herald_config::reload_dotenv(home)?;
        let config = Config::load(home, &process_env)?;
        let targets = TargetSet::build(&TargetSettings {
            platforms: &config.platforms,
            env: &process_env,
        });
        let names = targets.names().into_iter().map(str::to_owned).collect();
        self.replace(targets);
        Ok(names)
    }
}

fn modified(file: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(file).and_then(|m| m.modified()).ok()
}

/// Rebuilds the targets of `targets` on every SIGHUP, for as long as the process runs.
pub fn reload_on_sighup(targets: Arc<LiveTargets>, home: Home) {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        // Listening starts now, before the gateway serves: a SIGHUP never ends it.
        let Ok(mut hangups) = signal(SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: delivery targets are read only at start");
            return;
        };
        tokio::spawn(async move {
            while hangups.recv().await.is_some() {
                let (targets, home) = (targets.clone(), home.clone());
                match tokio::task::spawn_blocking(move || targets.reload(&home)).await {
                    Ok(Ok(names)) => tracing::info!(targets = ?names, "delivery targets reloaded"),
                    Ok(Err(e)) => {
                        tracing::warn!("delivery targets not reloaded: configuration error:\n{e}")
                    }
                    Err(e) => tracing::warn!(error = %e, "delivery targets not reloaded"),
                }
            }
        });
    }
}
