//! `herald gateway setup`: an interactive wizard (enable the webhook listener, port,
//! global secret, one target's token and home channel) that writes `config.yaml` and
//! `.env`. Answers may be piped for scripting; end of input takes the defaults.

use anyhow::Context;
use herald_config::Home;
use herald_config::default_config::{generate_secret, set_webhook_settings};
use std::io::{BufRead, Write};
use std::path::Path;
use std::process::ExitCode;

/// Targets the wizard can configure: (name, token variable, home channel variable).
const TARGETS: &[(&str, &str, &str)] = &[
    ("telegram", "TELEGRAM_BOT_TOKEN", "TELEGRAM_HOME_CHANNEL"),
    ("discord", "DISCORD_BOT_TOKEN", "DISCORD_HOME_CHANNEL"),
    ("slack", "SLACK_BOT_TOKEN", "SLACK_HOME_CHANNEL"),
    ("mattermost", "MATTERMOST_TOKEN", "MATTERMOST_HOME_CHANNEL"),
];

struct Asker<R: BufRead, W: Write> {
    input: R,
    out: W,
}

impl<R: BufRead, W: Write> Asker<R, W> {
    /// Shows the question; `None` at end of input.
    fn read(&mut self, question: &str, shown_default: &str) -> anyhow::Result<Option<String>> {
        if shown_default.is_empty() {
            write!(self.out, "{question}: ")?;
        } else {
            write!(self.out, "{question} [{shown_default}]: ")?;
        }
        self.out.flush()?;
        let mut line = String::new();
        if self.input.read_line(&mut line)? == 0 {
            writeln!(self.out)?;
            return Ok(None);
        }
        Ok(Some(line.trim().to_owned()))
    }

    /// Asks; an empty answer or end of input gives `default`.
    fn ask(&mut self, question: &str, default: &str) -> anyhow::Result<String> {
        Ok(self
            .read(question, default)?
            .filter(|a| !a.is_empty())
            .unwrap_or_else(|| default.to_owned()))
    }

    fn yes(&mut self, question: &str, default: bool) -> anyhow::Result<bool> {
        loop {
            let Some(answer) = self.read(question, if default { "Y/n" } else { "y/N" })? else {
                return Ok(default);
            };
            match answer.to_ascii_lowercase().as_str() {
                "" => return Ok(default),
                "y" | "yes" => return Ok(true),
                "n" | "no" => return Ok(false),
                _ => writeln!(self.out, "  Please answer y or n.")?,
            }
        }
    }
}

pub fn run(home: &Home) -> anyhow::Result<ExitCode> {
    let stdin = std::io::stdin();
    let mut asker = Asker {
        input: stdin.lock(),
        out: std::io::stdout(),
    };
    wizard(home, &mut asker)
}

fn wizard<R: BufRead, W: Write>(home: &Home, a: &mut Asker<R, W>) -> anyhow::Result<ExitCode> {
    home.create()
        .with_context(|| format!("cannot create {}", home.root().display()))?;
    writeln!(
        a.out,
        "herald gateway setup — writes {} and {}",
        home.config_file().display(),
        home.env_file().display()
    )?;
    let enable = a.yes("Enable the webhook listener?", true)?;
    let port = loop {
        let p = a.ask("Port", "8644")?;
        match p.parse::<u16>() {
            Ok(p) if p > 0 => break p,
            _ => writeln!(a.out, "  {p:?} is not a port number (1-65535).")?,
        }
    };
    let secret = a.ask("Global webhook secret (empty: generate one)", "")?;
    let secret = if secret.is_empty() {
        generate_secret()
    } else {
        secret
    };
    let names: Vec<&str> = TARGETS.iter().map(|t| t.0).collect();
    let target = loop {
        let t = a
            .ask(
                &format!("Configure a delivery target ({} or none)", names.join(", ")),
                "none",
            )?
            .to_ascii_lowercase();
        if t == "none" || names.contains(&t.as_str()) {
            break t;
        }
        writeln!(a.out, "  Unknown target {t:?}.")?;
    };
    let mut env_updates: Vec<(String, String)> = Vec::new();
    if let Some((name, token_var, home_var)) = TARGETS.iter().find(|t| t.0 == target) {
        let token = a.ask(&format!("{name} bot token ({token_var})"), "")?;
        if !token.is_empty() {
            env_updates.push(((*token_var).to_owned(), token));
        }
        let channel = a.ask(&format!("{name} home channel / chat id ({home_var})"), "")?;
        if !channel.is_empty() {
            env_updates.push(((*home_var).to_owned(), channel));
        }
    }

    set_webhook_settings(&home.config_file(), enable, port, &secret)?;
    update_env(&home.env_file(), &env_updates)?;
    writeln!(a.out)?;
    writeln!(a.out, "Wrote {}", home.config_file().display())?;
    if !env_updates.is_empty() {
        writeln!(
            a.out,
            "Wrote {} ({})",
            home.env_file().display(),
            env_updates
                .iter()
                .map(|(k, _)| k.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        )?;
    }
    writeln!(a.out, "Start the gateway with: herald gateway run")?;
    Ok(ExitCode::SUCCESS)
}

/// Replaces or appends `KEY=value` lines, keeping the others.
fn update_env(path: &Path, updates: &[(String, String)]) -> anyhow::Result<()> {
    if updates.is_empty() {
        return Ok(());
    }
    let existing = std::fs::read_to_string(path).unwrap_or_default();
    let mut lines: Vec<String> = existing.lines().map(str::to_owned).collect();
    for (key, value) in updates {
        let line = format!("{key}={value}");
        match lines.iter_mut().find(|l| {
            l.trim_start()
                .strip_prefix(key.as_str())
                .is_some_and(|r| r.trim_start().starts_with('='))
        }) {
            Some(l) => *l = line,
            None => lines.push(line),
        }
    }
    let mut text = lines.join("\n");
    text.push('\n');
    write_private(path, text.as_bytes())
}

fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    herald_config::default_config::write_private_replace(path, bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}
