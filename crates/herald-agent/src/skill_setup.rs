//! The environment variables a skill says it needs, as Hermes reads its front matter:
//! `required_environment_variables` (names, or `{name, prompt, help, required_for,
//! optional}`), `setup.collect_secrets` (`{env_var, prompt, provider_url}`) and the older
//! `prerequisites.env_vars`.

use serde::Deserialize;

/// One variable a skill needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequiredEnv {
    pub name: String,
    pub prompt: String,
    pub help: Option<String>,
    pub required_for: Option<String>,
    pub optional: bool,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Front {
    required_environment_variables: OneOrMany<Entry>,
    setup: Setup,
    prerequisites: Prerequisites,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Setup {
    collect_secrets: OneOrMany<Entry>,
    help: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Prerequisites {
    env_vars: OneOrMany<String>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany<T> {
    Many(Vec<T>),
    One(T),
}

impl<T> Default for OneOrMany<T> {
    fn default() -> Self {
        OneOrMany::Many(Vec::new())
    }
}

impl<T> OneOrMany<T> {
    fn into_vec(self) -> Vec<T> {
        match self {
            OneOrMany::Many(v) => v,
            OneOrMany::One(t) => vec![t],
        }
    }
}

#[derive(Deserialize)]
#[serde(untagged)]
enum Entry {
    Name(String),
    Full {
        #[serde(alias = "env_var")]
        name: String,
        prompt: Option<String>,
        #[serde(alias = "provider_url", alias = "url")]
        help: Option<String>,
        required_for: Option<String>,
        #[serde(default)]
        optional: bool,
    },
}

/// Whether `name` is a variable name (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_var_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The variables the front matter `front` (YAML between the `---` lines) names, each
/// once, in order; unreadable front matter names none.
pub fn required_env(front: &str) -> Vec<RequiredEnv> {
    let front: Front = serde_saphyr::from_str(front).unwrap_or_default();
    let setup_help = front.setup.help.clone();
    let entries = front
        .required_environment_variables
        .into_vec()
        .into_iter()
        .chain(front.setup.collect_secrets.into_vec())
        .chain(
            front
                .prerequisites
                .env_vars
                .into_vec()
                .into_iter()
                .map(Entry::Name),
        );
    let mut out: Vec<RequiredEnv> = Vec::new();
    for entry in entries {
        let need = match entry {
            Entry::Name(name) => RequiredEnv {
                prompt: format!("Enter value for {name}"),
                name,
                help: setup_help.clone(),
                required_for: None,
                optional: false,
            },
            Entry::Full {
                name,
                prompt,
                help,
                required_for,
                optional,
            } => RequiredEnv {
                prompt: prompt.unwrap_or_else(|| format!("Enter value for {name}")),
                name,
                help: help.or_else(|| setup_help.clone()),
                required_for,
                optional,
            },
        };
        if is_var_name(&need.name) && !out.iter().any(|o| o.name == need.name) {
            out.push(need);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_hermes_reads_is_read() {
        let front = "name: weather\nrequired_environment_variables:\n  - name: OPENWEATHER_API_KEY\n    prompt: OpenWeather API key\n    help: https://example.com/keys\n    required_for: forecasts\n  - PLAIN_VAR\n  - name: OPT\n    optional: true\nsetup:\n  collect_secrets:\n    - env_var: SETUP_KEY\n      provider_url: https://p\nprerequisites:\n  env_vars: [LEGACY_VAR, PLAIN_VAR, 'not valid']\n";
        let got = required_env(front);
        let names: Vec<&str> = got.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "OPENWEATHER_API_KEY",
                "PLAIN_VAR",
                "OPT",
                "SETUP_KEY",
                "LEGACY_VAR"
            ]
        );
        assert_eq!(got[0].prompt, "OpenWeather API key");
        assert_eq!(got[0].required_for.as_deref(), Some("forecasts"));
        assert_eq!(got[1].prompt, "Enter value for PLAIN_VAR");
        assert!(got[2].optional);
        assert_eq!(got[3].help.as_deref(), Some("https://p"));
        assert!(required_env("prerequisites:\n  env_vars: ONE\n")[0].name == "ONE");
        assert!(required_env(": not yaml [").is_empty());
    }
}
