//! What `herald setup --from-hermes` did, said in full: what was carried as it was,
//! what was converted, what was kept, what was left behind (each with why and what to
//! do) and the findings of the moved configuration. Printed, and kept in the herald
//! home as [`FILE_NAME`].

use std::fmt::Write as _;
use std::path::Path;

/// The report's file in the herald home.
pub const FILE_NAME: &str = "hermes-migration.txt";

/// One migration's account.
#[derive(Default)]
pub struct Report {
    /// Copied as it was.
    pub carried: Vec<String>,
    /// Already in the herald home: kept, not overwritten.
    pub kept: Vec<String>,
    /// Not a regular file: not copied.
    pub skipped: Vec<String>,
    /// Brought over in herald's own form (sessions into the session store, ...).
    pub converted: Vec<String>,
    /// herald's bundled skills installed beside the migrated ones.
    pub bundled: Vec<String>,
    /// Bundled skills not installed because a migrated skill has the name.
    pub bundled_shadowed: Vec<String>,
    /// (what, why and what to do).
    pub left_behind: Vec<(String, String)>,
    /// The moved configuration's findings, each a sentence.
    pub findings: Vec<String>,
}

impl Report {
    /// The report as text.
    pub fn render(&self, from: &Path, home: &Path) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "Moved from {} to {} (the Hermes home is unchanged).",
            from.display(),
            home.display()
        );
        section(&mut out, "Carried", &self.carried, "");
        if self.carried.is_empty() {
            let _ = writeln!(out, "Carried: nothing new to copy");
        }
        section(
            &mut out,
            "Kept",
            &self.kept,
            " (already in the herald home; not overwritten)",
        );
        section(
            &mut out,
            "Skipped",
            &self.skipped,
            " (a link or not a regular file: never followed)",
        );
        section(&mut out, "Converted", &self.converted, "");
        section(
            &mut out,
            "Added",
            &self.bundled,
            " (a skill herald ships; the Hermes home had none of that name)",
        );
        section(
            &mut out,
            "Not added",
            &self.bundled_shadowed,
            " (herald's skill of that name: the migrated one is kept)",
        );
        if !self.left_behind.is_empty() {
            let _ = writeln!(out, "Left behind:");
            for (what, why) in &self.left_behind {
                let _ = writeln!(out, "  {what}: {why}");
            }
        }
        if self.findings.is_empty() {
            let _ = writeln!(out, "Findings: none");
        } else {
            let _ = writeln!(out, "Findings:");
            for f in &self.findings {
                let _ = writeln!(out, "  - {f}");
            }
        }
        let _ = writeln!(
            out,
            "Check it with `herald config check`, then start with `herald gateway run`."
        );
        out
    }
}

fn section(out: &mut String, title: &str, items: &[String], suffix: &str) {
    if items.is_empty() {
        return;
    }
    let _ = writeln!(out, "{title}:");
    for item in items {
        let _ = writeln!(out, "  {item}{suffix}");
    }
}

/// Why a top-level entry of a Hermes home that herald does not carry is left behind,
/// and what to do about it.
pub fn left_behind_reason(name: &str) -> &'static str {
    match name {
        "auth.json" => {
            "credentials of `hermes login` (a provider's OAuth); herald takes API keys from .env: put the provider's key there (`herald setup` asks for it)"
        }
        "sessions" => {
            "Hermes's older per-session JSON transcripts; the sessions of state.db are what herald imports"
        }
        "logs" => "Hermes's own logs",
        "hooks" => {
            "Hermes's gateway event hooks (HOOK.yaml with a handler); herald runs plugins' hooks: port a hook to a plugin"
        }
        "profiles" => {
            "other Hermes profiles: move each with `herald setup --from-hermes <that profile's folder>` into its own herald home"
        }
        "pairing" => "chat users approved by pairing: they pair again with herald's bot",
        "channel_directory.json" => {
            "the chats Hermes's bots have seen; herald's chat doors learn them as messages come"
        }
        "gateway.pid"
        | "gateway_state.json"
        | "gateway.lock"
        | "auth.lock"
        | ".update_check"
        | ".tirith-install-failed" => "Hermes's running state",
        ".skills_prompt_snapshot.json" => "Hermes's cache of its skills prompt",
        "bin" => "programs Hermes installed for itself",
        "hermes-agent" => "Hermes's own program",
        "state.db-wal" | "state.db-shm" => "part of state.db (read with it)",
        "image_cache"
        | "audio_cache"
        | "document_cache"
        | "browser_screenshots"
        | "checkpoints"
        | "sandboxes"
        | "pastes"
        | "cache"
        | "tts_cache"
        | "models_dev_cache.json" => "a cache; herald makes what it needs",
        _ => "herald does not read it",
    }
}
