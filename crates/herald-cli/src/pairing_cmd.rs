//! `herald pairing list | approve | revoke | clear-pending`: the users who paired with
//! a chat bot, in Hermes's files and words.

use herald_chat::pairing::PairingStore;
use herald_config::Home;
use std::process::ExitCode;

#[derive(clap::Subcommand, Debug)]
pub enum PairingCommand {
    /// The pending requests (codes shown as the first digits of their hash) and the
    /// approved users.
    List,
    /// Approves a code a user got from the bot: they are answered from their next
    /// message on.
    Approve { platform: String, code: String },
    /// Takes a user's approval back.
    Revoke { platform: String, user_id: String },
    /// Drops every pending request.
    ClearPending,
}

pub fn run(home: &Home, command: PairingCommand) -> anyhow::Result<ExitCode> {
    let store = PairingStore::of_home(home.root());
    match command {
        PairingCommand::List => list(&store),
        PairingCommand::Approve { platform, code } => approve(home, &store, &platform, &code),
        PairingCommand::Revoke { platform, user_id } => {
            let platform = platform.trim().to_lowercase();
            if store.revoke(&platform, &user_id)? {
                allowlist_remove(home, &platform, &user_id)?;
                outln!("\n  Revoked access for user {user_id} on {platform}.\n");
                return Ok(ExitCode::SUCCESS);
            }
            outln!("\n  User {user_id} not found in approved list for {platform}.\n");
            Ok(ExitCode::FAILURE)
        }
        PairingCommand::ClearPending => {
            match store.clear_pending(None)? {
                0 => outln!("\n  No pending requests to clear.\n"),
                n => outln!("\n  Cleared {n} pending pairing request(s).\n"),
            }
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn list(store: &PairingStore) -> anyhow::Result<ExitCode> {
    let pending = store.list_pending(None)?;
    let approved = store.list_approved(None);
    if pending.is_empty() && approved.is_empty() {
        outln!("No pairing data found. No one has tried to pair yet~");
        return Ok(ExitCode::SUCCESS);
    }
    match pending.is_empty() {
        true => outln!("\n  No pending pairing requests."),
        false => {
            outln!("\n  Pending Pairing Requests ({}):", pending.len());
            outln!(
                "  {:<12} {:<10} {:<20} {:<20} Age",
                "Platform",
                "Code",
                "User ID",
                "Name"
            );
            outln!(
                "  {:<12} {:<10} {:<20} {:<20} ---",
                "--------",
                "----",
                "-------",
                "----"
            );
            for p in &pending {
                outln!(
                    "  {:<12} {:<10} {:<20} {:<20} {}m ago",
                    p.platform,
                    p.code,
                    p.user_id,
                    p.user_name,
                    p.age_minutes
                );
            }
        }
    }
    match approved.is_empty() {
        true => outln!("\n  No approved users."),
        false => {
            outln!("\n  Approved Users ({}):", approved.len());
            outln!("  {:<12} {:<20} {:<20}", "Platform", "User ID", "Name");
            outln!("  {:<12} {:<20} {:<20}", "--------", "-------", "----");
            for a in &approved {
                outln!("  {:<12} {:<20} {:<20}", a.platform, a.user_id, a.user_name);
            }
        }
    }
    outln!();
    Ok(ExitCode::SUCCESS)
}

fn approve(
    home: &Home,
    store: &PairingStore,
    platform: &str,
    code: &str,
) -> anyhow::Result<ExitCode> {
    let platform = platform.trim().to_lowercase();
    let code = code.trim().to_uppercase();
    if let Some((user_id, name)) = store.approve_code(&platform, &code)? {
        allowlist_add(home, &platform, &user_id)?;
        let shown = match name.is_empty() {
            true => user_id,
            false => format!("{name} ({user_id})"),
        };
        outln!("\n  Approved! User {shown} on {platform} can now use the bot~");
        outln!("  They'll be recognized automatically on their next message.\n");
        return Ok(ExitCode::SUCCESS);
    }
    match store.locked_minutes(&platform) {
        Some(mins) => {
            outln!(
                "\n  Platform '{platform}' is locked out after too many failed approval attempts."
            );
            outln!("  Lockout clears in ~{mins} minute(s).");
            outln!(
                "  To reset sooner, delete the '_lockout:{platform}' entry from {}\n",
                store.dir().join("_rate_limits.json").display()
            );
        }
        None => {
            outln!("\n  Code '{code}' not found or expired for platform '{platform}'.");
            outln!("  Run 'herald pairing list' to see pending codes.\n");
        }
    }
    Ok(ExitCode::FAILURE)
}

/// The platform's allow-list variable (`TELEGRAM_ALLOWED_USERS`).
fn allowlist_var(platform: &str) -> Option<String> {
    let served = [
        ("telegram", "TELEGRAM"),
        ("slack", "SLACK"),
        ("discord", "DISCORD"),
    ];
    let waiting = herald_config::chat_platforms::CHAT_PLATFORMS.iter();
    served
        .iter()
        .chain(waiting)
        .find(|(name, _)| *name == platform)
        .map(|(_, prefix)| format!("{prefix}_ALLOWED_USERS"))
}

/// As Hermes: an approved user joins the platform's allow-list in `.env` when the
/// operator keeps one (an open gateway stays open).
fn allowlist_add(home: &Home, platform: &str, user_id: &str) -> anyhow::Result<()> {
    let Some(var) = allowlist_var(platform) else {
        return Ok(());
    };
    let current = herald_config::process_env(&var).unwrap_or_default();
    let mut ids: Vec<&str> = current
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if ids.is_empty() || ids.contains(&"*") || ids.contains(&user_id) {
        return Ok(());
    }
    ids.push(user_id);
    herald_config::env_file::set_value(&home.env_file(), &var, &ids.join(","))?;
    Ok(())
}

/// A revoked user leaves the allow-list in `.env` too.
fn allowlist_remove(home: &Home, platform: &str, user_id: &str) -> anyhow::Result<()> {
    let Some(var) = allowlist_var(platform) else {
        return Ok(());
    };
    let current = herald_config::process_env(&var).unwrap_or_default();
    let ids: Vec<&str> = current
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    let left: Vec<&str> = ids.iter().copied().filter(|i| *i != user_id).collect();
    if left.len() == ids.len() {
        return Ok(());
    }
    match left.is_empty() {
        true => {
            herald_config::env_file::remove_value(&home.env_file(), &var)?;
        }
        false => herald_config::env_file::set_value(&home.env_file(), &var, &left.join(","))?,
    }
    Ok(())
}
