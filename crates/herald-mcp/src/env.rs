//! The environment a stdio server starts with, as Hermes builds it: only the variables
//! a program needs to run (no API keys, no `HERALD_*`, no proxies), then the server's
//! own `env:` on top.

/// Variables passed through by name.
const KEPT: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "TERM", "SHELL", "TMPDIR",
];

/// Whether `name` passes from herald's environment to a server's.
fn kept(name: &str) -> bool {
    KEPT.contains(&name) || name.starts_with("XDG_")
}

/// The environment of a stdio server: the kept part of herald's, then `own`.
pub fn server_env(own: &[(String, String)]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::env::vars().filter(|(k, _)| kept(k)).collect();
    for (k, v) in own {
        out.retain(|(name, _)| name != k);
        out.push((k.clone(), v.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_stay_out_and_own_values_win() {
        assert!(kept("PATH") && kept("XDG_RUNTIME_DIR"));
        assert!(!kept("OPENROUTER_API_KEY") && !kept("HTTPS_PROXY") && !kept("HERALD_HOME"));
        let env = server_env(&[("PATH".into(), "/x".into()), ("TOKEN".into(), "t".into())]);
        assert_eq!(env.iter().filter(|(k, _)| k == "PATH").count(), 1);
        assert!(env.contains(&("PATH".into(), "/x".into())));
        assert!(env.contains(&("TOKEN".into(), "t".into())));
    }
}
