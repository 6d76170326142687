//! Finding plugins: a folder under `<home>/plugins/` with `plugin.yaml` and
//! `__init__.py` is a Python plugin; it runs when `plugins.enabled` names it (by folder
//! or manifest name) and `plugins.disabled` does not. An enabled name with no folder
//! is looked up among the entry points of group `hermes_agent.plugins`.

use serde::Deserialize;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// `plugin.yaml`, as far as herald reads it.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Manifest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub kind: Option<String>,
}

/// A plugin herald knows of.
#[derive(Debug, Clone, PartialEq)]
pub struct Plugin {
    /// The folder's name (or the entry point's).
    pub key: String,
    /// The manifest's name, else the key.
    pub name: String,
    /// The folder; `None` for an entry point.
    pub path: Option<PathBuf>,
    pub manifest: Manifest,
    /// Why the manifest could not be read, if it could not.
    pub problem: Option<String>,
    pub enabled: bool,
    /// Whether it is there to load: a folder, or an entry point an installed package
    /// declares (an enabled name found nowhere is not).
    pub installed: bool,
}

impl Plugin {
    /// How `herald plugins list` and the TUI's plugin hub show it.
    pub fn status(&self) -> &'static str {
        match (self.enabled, self.installed, self.path.is_some()) {
            (true, false, _) => "enabled, not installed",
            (true, true, true) => "enabled",
            (true, true, false) => "enabled (entry point)",
            (false, _, true) => "not enabled",
            (false, _, false) => "not enabled (entry point)",
        }
    }

    /// How the plugin host is told about it (`initialize`'s `plugins`).
    /// The host's description of this plugin; `may_override`: the operator lets it
    /// replace built-in tools.
    pub fn to_host(&self, may_override: bool) -> Value {
        json!({
            "key": self.key,
            "name": self.name,
            "source": if self.path.is_some() { "user" } else { "entrypoint" },
            "path": self.path.as_ref().map(|p| p.display().to_string()),
            "entry_point": self.path.is_none().then(|| self.key.clone()),
            "manifest": {
                "name": self.name,
                "version": self.manifest.version,
                "kind": self.manifest.kind.clone().unwrap_or_else(|| "standalone".into()),
            },
            "settings": {"allow_tool_override": may_override},
        })
    }
}

/// Whether `names` lists this plugin (by key or manifest name).
pub(crate) fn named(names: &[String], key: &str, name: &str) -> bool {
    names.iter().any(|n| n == key || n == name)
}

fn read_manifest(dir: &Path) -> (Manifest, Option<String>) {
    let path = dir.join("plugin.yaml");
    match std::fs::read_to_string(&path) {
        Ok(text) if text.trim().is_empty() => (Manifest::default(), None),
        Ok(text) => match herald_config::from_yaml::<Manifest>(&text) {
            Ok(m) => (m, None),
            Err(e) => (
                Manifest::default(),
                Some(format!("{}: {e}", path.display())),
            ),
        },
        Err(e) => (
            Manifest::default(),
            Some(format!("{}: {e}", path.display())),
        ),
    }
}

/// Every folder plugin under `plugins_dir`, sorted by key, then the enabled names with
/// no folder (taken for entry points: the plugin host looks them up).
pub fn discover(plugins_dir: &Path, enabled: &[String], disabled: &[String]) -> Vec<Plugin> {
    let mut found: Vec<Plugin> = std::fs::read_dir(plugins_dir)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.join("plugin.yaml").is_file() && p.join("__init__.py").is_file())
                .filter_map(|dir| {
                    let key = dir.file_name()?.to_str()?.to_owned();
                    let (manifest, problem) = read_manifest(&dir);
                    let name = manifest.name.clone().unwrap_or_else(|| key.clone());
                    let enabled = named(enabled, &key, &name) && !named(disabled, &key, &name);
                    Some(Plugin {
                        key,
                        name,
                        path: Some(dir),
                        manifest,
                        problem,
                        enabled,
                        installed: true,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    found.sort_by(|a, b| a.key.cmp(&b.key));
    for name in enabled {
        let known = found.iter().any(|p| &p.key == name || &p.name == name);
        if !known && !disabled.contains(name) {
            found.push(Plugin {
                key: name.clone(),
                name: name.clone(),
                path: None,
                manifest: Manifest::default(),
                problem: None,
                enabled: true,
                installed: true,
            });
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plugin(root: &Path, dir: &str, manifest: &str) {
        let d = root.join(dir);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("plugin.yaml"), manifest).unwrap();
        std::fs::write(d.join("__init__.py"), "def register(ctx):\n    pass\n").unwrap();
    }

    #[test]
    fn folders_with_a_manifest_are_plugins_enabled_by_key_or_name_unless_disabled() {
        let dir = tempfile::tempdir().unwrap();
        plugin(
            dir.path(),
            "demo",
            "name: middleware-demo\nversion: 0.1.0\n",
        );
        plugin(dir.path(), "other", "");
        plugin(dir.path(), "off", "name: off\n");
        std::fs::create_dir_all(dir.path().join("not-a-plugin")).unwrap();
        let on = [
            "middleware-demo".to_owned(),
            "off".to_owned(),
            "ep".to_owned(),
        ];
        let found = discover(dir.path(), &on, &["off".to_owned()]);
        let seen: Vec<(&str, &str, bool)> = found
            .iter()
            .map(|p| (p.key.as_str(), p.name.as_str(), p.enabled))
            .collect();
        assert_eq!(
            seen,
            [
                ("demo", "middleware-demo", true),
                ("off", "off", false),
                ("other", "other", false),
                ("ep", "ep", true),
            ]
        );
        assert_eq!(found[3].to_host(false)["entry_point"], "ep");
        assert_eq!(found[0].to_host(false)["manifest"]["version"], "0.1.0");
    }
}
