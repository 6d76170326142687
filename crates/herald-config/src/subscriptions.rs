//! `webhook_subscriptions.json`: routes created at run time (spec §17).

use crate::error::{ConfigError, Problem};
use crate::node::{Node, NodeValue};
use crate::reader::Reader;
use crate::route::{Route, RouteContext, RouteSource, read_route};
use std::path::Path;

/// The routes of a subscriptions file, and why any entry was skipped.
#[derive(Debug, Default)]
pub struct Subscriptions {
    pub routes: Vec<Route>,
    pub skipped: Vec<Problem>,
    /// Mistakes in served subscriptions that change what they do (see `Reader::findings`).
    pub findings: Vec<String>,
}

/// Why the file as a whole could not be used (the caller keeps its previous routes).
#[derive(Debug, thiserror::Error)]
pub enum SubscriptionsError {
    #[error("{0}")]
    Read(#[from] ConfigError),
    #[error("{path}: not valid JSON ({message}); the previous subscriptions stay in use")]
    Json { path: String, message: String },
    #[error(
        "{path}: must be a JSON object of name to route; the previous subscriptions stay in use"
    )]
    NotObject { path: String },
}

/// Reads the subscriptions file. A missing file has no routes. Entries named like a
/// static route, or failing a start-up rule, are skipped with a warning.
pub fn load_subscriptions(
    path: &Path,
    static_names: &[&str],
    ctx: &RouteContext<'_>,
) -> Result<Subscriptions, SubscriptionsError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Subscriptions::default()),
        Err(source) => {
            return Err(ConfigError::Read {
                path: path.to_path_buf(),
                source,
            }
            .into());
        }
    };
    parse_subscriptions(path, &bytes, static_names, ctx)
}

/// Parses subscriptions file content (see [`load_subscriptions`]).
pub fn parse_subscriptions(
    path: &Path,
    bytes: &[u8],
    static_names: &[&str],
    ctx: &RouteContext<'_>,
) -> Result<Subscriptions, SubscriptionsError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| SubscriptionsError::Json {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
    let doc = Node::from_json(&value);
    let NodeValue::Map(entries) = &doc.value else {
        return Err(SubscriptionsError::NotObject {
            path: path.display().to_string(),
        });
    };
    let mut out = Subscriptions::default();
    for (name, node) in entries {
        let mut reader = Reader::new(path);
        if static_names.contains(&name.as_str()) {
            reader.warn(
                Some(node),
                name,
                "a route of this name is in config.yaml, which wins; this subscription is not used",
            );
            out.skipped.append(&mut reader.warnings);
            continue;
        }
        match read_route(
            &mut reader,
            name,
            node,
            name,
            RouteSource::Subscription,
            ctx,
        ) {
            Some(route) => {
                out.routes.retain(|r| r.name != *name);
                out.routes.push(route);
            }
            None => {
                for mut p in reader.errors.drain(..) {
                    p.message.push_str(" (subscription skipped)");
                    out.skipped.push(p);
                }
            }
        }
        out.skipped.append(&mut reader.warnings);
        out.findings.append(&mut reader.findings);
    }
    Ok(out)
}
