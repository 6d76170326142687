//! Mistakes herald serves through but that change what routes do (spec §1.1, §2.2: a
//! start is never blocked by a route-level mistake), gathered in one list: the start ends
//! with it and `herald config check` prints it.

use herald_config::{Config, Route};
use herald_deliver::TargetSet;

/// Every finding: the config's own, the subscriptions file's (entries skipped or
/// misspelt), and routes whose delivery target cannot deliver.
pub fn gather(config: &Config, targets: &TargetSet) -> Vec<String> {
    let mut findings = config.findings.clone();
    let mut routes: Vec<Route> = config.routes.clone();
    match config.subscriptions() {
        Ok(subs) => {
            findings.extend(subs.findings);
            findings.extend(
                subs.skipped
                    .iter()
                    .filter(|p| p.message.ends_with("(subscription skipped)"))
                    .map(|p| {
                        format!(
                            "subscription `{}` is not served: {}",
                            p.place.key, p.message
                        )
                    }),
            );
            routes.extend(subs.routes);
        }
        Err(e) => findings.push(format!("no subscription is served: {e}")),
    }
    findings.extend(undeliverable(&routes, targets));
    findings
}

/// Enabled routes whose target is not enabled or not known.
fn undeliverable(routes: &[Route], targets: &TargetSet) -> Vec<String> {
    routes
        .iter()
        .filter(|r| r.enabled)
        .filter_map(|r| {
            let why = targets.unavailable(&r.deliver)?;
            let (name, target) = (&r.name, r.deliver.trim());
            Some(if r.deliver_only {
                format!(
                    "route `{name}` delivers to {target}, which {why}: every request will answer 502"
                )
            } else {
                format!(
                    "route `{name}` delivers its answers to {target}, which {why}: every answer will fail to deliver"
                )
            })
        })
        .collect()
}
