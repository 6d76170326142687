//! Route scripts (spec §9): a child process under `<home>/scripts/` that may drop or
//! rewrite the payload. Runs in its own process group; when it ends or times out,
//! everything it started is killed, including processes that left its group.

use crate::process_tree;
use herald_config::home::{expand_env, resolve_home_path};
use serde_json::{Map, Value};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};

/// Most stdout bytes taken from a script; more is a failure.
pub const MAX_STDOUT_BYTES: usize = 1 << 20;
/// Most stderr bytes kept for the log.
pub const MAX_STDERR_BYTES: usize = 4096;

/// What a script decided.
#[derive(Debug, Clone, PartialEq)]
pub enum ScriptOutcome {
    /// Drop the event (the reason is for the log only).
    Ignore(String),
    /// Use this payload instead.
    Replace(Map<String, Value>),
    /// Keep the payload as it is.
    Unchanged,
    /// Add `script_output` with this text.
    Output(String),
}

/// Environment variables never passed to scripts: credentials and platform settings.
fn is_credential_var(name: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "OPENAI_",
        "OPENROUTER_",
        "ANTHROPIC_",
        "TELEGRAM_",
        "DISCORD_",
        "SLACK_",
        "MATTERMOST_",
        "MATRIX_",
        "SIGNAL_",
        "WHATSAPP_",
        "EMAIL_",
        "TWILIO_",
        "SMS_",
        "HASS_",
        "NTFY_",
        "BLUEBUBBLES_",
        "WEIXIN_",
        "FEISHU_",
        "DINGTALK_",
        "WECOM_",
        "QQ_",
        "QQBOT_",
        "YUANBAO_",
        "WEBHOOK_",
        "GEMINI_",
        "GOOGLE_API",
        "NOUS_",
        "TAVILY_",
        "CUSTOM_",
        "GH_TOKEN",
        "GITHUB_TOKEN",
        "HERMES_",
        "AWS_SECRET",
    ];
    const SUFFIXES: &[&str] = &[
        "_API_KEY",
        "_TOKEN",
        "_SECRET",
        "_PASSWORD",
        "_BASE_URL",
        "_ACCESS_KEY",
    ];
    let upper = name.to_ascii_uppercase();
    PREFIXES.iter().any(|p| upper.starts_with(p)) || SUFFIXES.iter().any(|s| upper.ends_with(s))
}

/// Resolves a route's `script` value inside the scripts root; `Err` says why not.
pub fn resolve(script: &str, home: &Path) -> Result<PathBuf, String> {
    let scripts_root = home.join("scripts");
    let root = scripts_root
        .canonicalize()
        .map_err(|_| format!("scripts folder {} does not exist", scripts_root.display()))?;
    let raw = expand_env(script.trim());
    let raw = raw.trim();
    if raw.is_empty() {
        return Err("script is empty".into());
    }
    let candidate = if raw.starts_with('~') || Path::new(raw).is_absolute() {
        resolve_home_path(raw, home)
    } else {
        root.join(raw)
    };
    let resolved = candidate
        .canonicalize()
        .map_err(|_| format!("script {raw:?} does not exist"))?;
    if !resolved.starts_with(&root) {
        return Err(format!("script {raw:?} is outside {}", root.display()));
    }
    if !resolved.is_file() {
        return Err(format!("script {raw:?} is not a regular file"));
    }
    Ok(resolved)
}

/// Runs a resolved script with the payload on stdin: as JSON, or as `text` when given
/// (the body's own text, when it holds numbers the payload holds only through
/// stand-ins).
pub async fn run(
    path: &Path,
    payload: &Map<String, Value>,
    text: Option<&[u8]>,
    timeout: Duration,
) -> ScriptOutcome {
    let is_shell = path
        .extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| e.eq_ignore_ascii_case("sh") || e.eq_ignore_ascii_case("bash"));
    let mut cmd = herald_process::command(if is_shell { "bash" } else { "python3" });
    cmd.arg(path)
        .current_dir(path.parent().unwrap_or(Path::new("/")))
        .stdin(Stdio::piped());
    let marker = process_tree::new_run_marker();
    cmd.env(process_tree::RUN_MARKER_VAR, &marker);
    // SAFETY: the closure only makes a syscall (prctl), which is async-signal-safe.
    unsafe {
        cmd.pre_exec(process_tree::become_subreaper);
    }
    for (name, _) in std::env::vars_os() {
        if let Some(n) = name.to_str()
            && is_credential_var(n)
        {
            cmd.env_remove(&name);
        }
    }
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return ScriptOutcome::Ignore(format!("could not start: {e}")),
    };
    let pid = child.id();
    let stdin_bytes = match text {
        Some(text) => text.to_vec(),
        None => serde_json::to_vec(payload).unwrap_or_default(),
    };
    let mut stdin = child.stdin.take();
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let work = async {
        let feed = async {
            if let Some(mut s) = stdin.take() {
                // A script that does not read its input is fine.
                let _ = s.write_all(&stdin_bytes).await;
                let _ = s.shutdown().await;
            }
        };
        let (_, out, err, status) = tokio::join!(
            feed,
            read_capped(stdout.as_mut(), MAX_STDOUT_BYTES),
            read_capped(stderr.as_mut(), MAX_STDERR_BYTES),
            child.wait()
        );
        (out, err, status)
    };
    let result = tokio::time::timeout(timeout, work).await;
    // Everything the script started goes with it, whether it finished or timed out.
    let strays = tokio::task::spawn_blocking(move || process_tree::kill_run(pid, &marker))
        .await
        .unwrap_or(0);
    if strays > 0 {
        tracing::debug!(script = %path.display(), processes = strays, "killed processes the script left behind");
    }
    let (out, err, status) = match result {
        Ok(r) => r,
        Err(_) => {
            let _ = child.wait().await;
            return ScriptOutcome::Ignore(format!(
                "timed out after {}s and was killed",
                timeout.as_secs()
            ));
        }
    };
    if !err.0.is_empty() {
        tracing::debug!(script = %path.display(), stderr = %String::from_utf8_lossy(&err.0), "script stderr");
    }
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => return ScriptOutcome::Ignore(format!("exited with {s}")),
        Err(e) => return ScriptOutcome::Ignore(format!("could not be waited for: {e}")),
    }
    if out.1 {
        return ScriptOutcome::Ignore(format!(
            "wrote more than {MAX_STDOUT_BYTES} bytes to stdout"
        ));
    }
    interpret(&String::from_utf8_lossy(&out.0))
}

/// Interprets a script's stdout (spec §9.3).
pub fn interpret(stdout: &str) -> ScriptOutcome {
    let text = stdout.trim();
    if text.is_empty() || text == "[SILENT]" {
        return ScriptOutcome::Ignore("no output".into());
    }
    // Read as Python reads it: numbers a tree cannot hold become stand-ins.
    let tree = herald_protocol::json_literal::tree_text(text.as_bytes());
    match serde_json::from_slice::<Value>(&tree) {
        Ok(Value::Object(map)) => {
            let flagged = |k: &str| map.get(k) == Some(&Value::Bool(true));
            if flagged("__hermes_ignore__") || flagged("[SILENT]") {
                ScriptOutcome::Ignore("script asked to ignore".into())
            } else if map.is_empty() {
                ScriptOutcome::Unchanged
            } else {
                ScriptOutcome::Replace(map)
            }
        }
        Ok(_) => ScriptOutcome::Ignore("output is JSON but not an object".into()),
        Err(_) => ScriptOutcome::Output(text.to_owned()),
    }
}

/// Reads up to `cap` bytes, then drains the rest; returns the bytes and whether it overflowed.
async fn read_capped<R: AsyncRead + Unpin>(reader: Option<&mut R>, cap: usize) -> (Vec<u8>, bool) {
    let Some(reader) = reader else {
        return (Vec::new(), false);
    };
    let mut kept = Vec::new();
    let mut overflow = false;
    // On the heap: a buffer held across `.await` is part of the future, and the
    // script's future is part of every webhook request's (moved on each request).
    let mut buf = vec![0u8; 8192];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                // After the first chunk that does not fit, nothing more is kept: the
                // kept bytes stay one unbroken prefix of the output.
                if !overflow && kept.len() + n <= cap {
                    kept.extend_from_slice(&buf[..n]);
                } else {
                    overflow = true;
                }
            }
        }
    }
    (kept, overflow)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stdout_rules() {
        assert!(matches!(interpret("  "), ScriptOutcome::Ignore(_)));
        assert!(matches!(interpret("[SILENT]\n"), ScriptOutcome::Ignore(_)));
        assert!(matches!(interpret("[1]"), ScriptOutcome::Ignore(_)));
        assert!(matches!(
            interpret(r#"{"__hermes_ignore__": true}"#),
            ScriptOutcome::Ignore(_)
        ));
        assert_eq!(
            interpret(r#"{"__hermes_ignore__": 1}"#),
            ScriptOutcome::Replace(
                json!({"__hermes_ignore__": 1})
                    .as_object()
                    .cloned()
                    .unwrap()
            )
        );
        assert_eq!(interpret("{}"), ScriptOutcome::Unchanged);
        assert_eq!(
            interpret(" hello \n"),
            ScriptOutcome::Output("hello".into())
        );
        // JSON as Python reads it: a number past a double is a number, not text.
        assert_eq!(
            interpret(r#"{"a": 1e400, "b": -0}"#),
            ScriptOutcome::Replace(json!({"a": f64::MAX, "b": 0}).as_object().cloned().unwrap())
        );
    }

    #[test]
    fn read_capped_keeps_an_unbroken_prefix() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // Two reads: 20 bytes (more than the cap of 10), then 5 that would fit.
        let mut two_chunks = (&[b'a'; 20][..]).chain(&[b'b'; 5][..]);
        let (kept, overflow) = rt.block_on(read_capped(Some(&mut two_chunks), 10));
        assert!(overflow);
        assert!(kept.is_empty(), "kept {kept:?}");
        let mut fits = (&b"hello"[..]).chain(&b" world"[..]);
        let (kept, overflow) = rt.block_on(read_capped(Some(&mut fits), 11));
        assert!(!overflow);
        assert_eq!(kept, b"hello world");
    }

    #[test]
    fn credential_vars() {
        for v in [
            "OPENAI_API_KEY",
            "TELEGRAM_BOT_TOKEN",
            "WEBHOOK_SECRET",
            "SLACK_HOME_CHANNEL",
            "MY_SERVICE_TOKEN",
        ] {
            assert!(is_credential_var(v), "{v}");
        }
        for v in ["PATH", "HOME", "LANG"] {
            assert!(!is_credential_var(v), "{v}");
        }
    }

    #[test]
    fn resolve_refuses_escapes() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join("scripts")).unwrap();
        std::fs::write(home.path().join("scripts/ok.py"), "").unwrap();
        std::fs::write(home.path().join("outside.py"), "").unwrap();
        std::fs::create_dir(home.path().join("scripts/dir")).unwrap();
        assert!(resolve("ok.py", home.path()).is_ok());
        assert!(resolve("~/.hermes/scripts/ok.py", home.path()).is_ok());
        assert!(resolve("../outside.py", home.path()).is_err());
        assert!(
            resolve(
                &home.path().join("outside.py").display().to_string(),
                home.path()
            )
            .is_err()
        );
        assert!(resolve("dir", home.path()).is_err());
        assert!(resolve("missing.py", home.path()).is_err());
        std::os::unix::fs::symlink(
            home.path().join("outside.py"),
            home.path().join("scripts/link.py"),
        )
        .unwrap();
        assert!(resolve("link.py", home.path()).is_err());
    }
}
