//! `herald gateway setup` (also bare `herald setup`): an interactive wizard (enable the
//! webhook listener, port, global secret, one target's token and home channel, the
//! model) that writes `config.yaml` and `.env`. Answers may be piped for scripting; end of
//! input takes the defaults. `herald setup --from-hermes` copies a Hermes home instead.

use anyhow::Context;
use herald_config::default_config::{
    ModelChoice, ModelProvider, SETUP_PROVIDER_KEY_ENV, SetupChoices, apply_setup, generate_secret,
};
use herald_config::{Config, Home, process_env};
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
    /// The input ended before a question was answered.
    ended: bool,
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
            self.ended = true;
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

/// `herald setup`.
#[derive(clap::Args, Debug)]
pub struct SetupArgs {
    /// Copy a Hermes home (default `~/.hermes`) into this herald home instead of asking:
    /// config.yaml, .env, webhook_subscriptions.json, scripts/, skills/, plugins/, SOUL.md.
    /// The Hermes home is left untouched; files already in the herald home are kept.
    #[arg(long, value_name = "HERMES_HOME")]
    #[allow(clippy::option_option)]
    from_hermes: Option<Option<std::path::PathBuf>>,
}

pub fn run_setup(home: &Home, args: SetupArgs) -> anyhow::Result<ExitCode> {
    match args.from_hermes {
        Some(from) => crate::hermes_import::run(home, from),
        None => run(home),
    }
}

pub fn run(home: &Home) -> anyhow::Result<ExitCode> {
    wizard(home, &mut stdin_asker())
}

fn stdin_asker() -> Asker<std::io::StdinLock<'static>, std::io::Stdout> {
    Asker {
        input: std::io::stdin().lock(),
        out: std::io::stdout(),
        ended: false,
    }
}

/// `herald acp --setup`: the provider and the model only (acp.md §6). Nothing else in
/// the home is touched, and input that ends before every question is answered changes
/// nothing.
pub fn run_model_only(home: &Home) -> anyhow::Result<ExitCode> {
    let a = &mut stdin_asker();
    writeln!(
        a.out,
        "herald acp --setup — sets the model ACP sessions use, in {}",
        home.config_file().display()
    )?;
    let mut env_updates = Vec::new();
    let model = ask_model(a, &mut env_updates)?;
    let Some(model) = model.filter(|_| !a.ended) else {
        writeln!(a.out, "Nothing changed.")?;
        return Ok(ExitCode::SUCCESS);
    };
    home.create()
        .with_context(|| format!("cannot create {}", home.root().display()))?;
    herald_config::default_config::apply_model(&home.config_file(), &model)?;
    update_env(&home.env_file(), &env_updates)?;
    writeln!(
        a.out,
        "Wrote the model {} to {}; `herald acp --check` tries it.",
        model.model,
        home.config_file().display()
    )?;
    Ok(ExitCode::SUCCESS)
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

    let model = ask_model(a, &mut env_updates)?;
    let choices = SetupChoices {
        enable,
        port,
        secret,
        model,
    };
    apply_setup(&home.config_file(), &choices)?;
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
    match Config::load(home, &process_env) {
        Ok(config) => print_try_it(&mut a.out, &config, false)?,
        Err(e) => writeln!(a.out, "The configuration does not load: {e}")?,
    }
    Ok(ExitCode::SUCCESS)
}

/// The model questions; `None` when the user keeps agent runs off for now.
fn ask_model<R: BufRead, W: Write>(
    a: &mut Asker<R, W>,
    env_updates: &mut Vec<(String, String)>,
) -> anyhow::Result<Option<ModelChoice>> {
    let provider = loop {
        let p = a
            .ask(
                "Model provider for agent runs (openrouter, endpoint = any OpenAI-compatible server, or none)",
                "none",
            )?
            .to_ascii_lowercase();
        match p.as_str() {
            "none" => return Ok(None),
            "openrouter" => break ModelProvider::OpenRouter,
            "endpoint" => {
                let base_url = a.ask("Base URL", "http://127.0.0.1:11434/v1")?;
                break ModelProvider::Endpoint { base_url };
            }
            _ => writeln!(a.out, "  Unknown provider {p:?}.")?,
        }
    };
    let (default_model, key_var) = match provider {
        ModelProvider::OpenRouter => ("anthropic/claude-sonnet-4.6", "OPENROUTER_API_KEY"),
        ModelProvider::Endpoint { .. } => ("llama3.1", SETUP_PROVIDER_KEY_ENV),
    };
    let model = a.ask("Model name", default_model)?;
    let key = a.ask(&format!("API key ({key_var}; empty: none)"), "")?;
    if !key.is_empty() {
        env_updates.push((key_var.to_owned(), key));
    }
    Ok(Some(ModelChoice { model, provider }))
}

/// Where the secret is and a signed request to try, as the first start prints them.
/// `starting`: said by a gateway that is starting (no need to tell the user to start it).
pub fn print_try_it(out: &mut dyn Write, config: &Config, starting: bool) -> anyhow::Result<()> {
    let port = config.webhook.port;
    let config_file = config.home.config_file();
    writeln!(
        out,
        "The global webhook secret is `platforms.webhook.extra.secret` in {}.",
        config_file.display()
    )?;
    let has_example = config.routes.iter().any(|r| r.name == "example");
    if !has_example {
        writeln!(
            out,
            "Add a route with `herald webhook subscribe NAME --deliver log`, start the gateway \
             with `herald gateway run`, then try it with `herald webhook test NAME`."
        )?;
        return Ok(());
    }
    if starting {
        writeln!(out, "Send a signed test request:")?;
    } else {
        writeln!(
            out,
            "Start the gateway with `herald gateway run`, then send a signed test request:"
        )?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "  SECRET=$(sed -n 's/^ *secret: *\"\\{{0,1\\}}\\([^\" ]*\\)\"\\{{0,1\\}} *$/\\1/p' '{}' | head -n 1)",
        config_file.display()
    )?;
    writeln!(out, "  BODY='{{\"hello\": \"world\"}}'")?;
    writeln!(
        out,
        "  SIG=$(printf '%s' \"$BODY\" | openssl dgst -sha256 -hmac \"$SECRET\" | sed 's/^.* //')"
    )?;
    writeln!(
        out,
        "  curl -i http://127.0.0.1:{port}/webhooks/example -H 'X-GitHub-Event: ping' \\"
    )?;
    writeln!(
        out,
        "       -H \"X-Hub-Signature-256: sha256=$SIG\" -d \"$BODY\""
    )?;
    writeln!(out)?;
    Ok(())
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
