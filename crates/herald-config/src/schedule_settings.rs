//! `schedules:`, typed: scheduled jobs named in `config.yaml` (herald's; Hermes keeps its
//! jobs in `cron/jobs.json` only). Each entry is a job the scheduler runs beside the
//! file's: `schedule` and `prompt` (or `skills`) as `herald schedule add` takes them.
//!
//! ```yaml
//! schedules:
//!   digest:
//!     schedule: "0 9 * * 1-5"
//!     prompt: Summarise yesterday's merged pull requests.
//!     deliver: telegram
//! ```

use crate::node::Node;
use crate::reader::Reader;

/// One entry of `schedules:`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleSettings {
    /// Its key under `schedules:`.
    pub name: String,
    pub schedule: String,
    pub prompt: String,
    pub deliver: Option<String>,
    pub skills: Vec<String>,
    pub toolsets: Option<Vec<String>>,
    pub timezone: Option<String>,
    /// `grace` (default), `always` or `skip`.
    pub catch_up: Option<String>,
    pub enabled: bool,
}

const KEYS: &[&str] = &[
    "schedule", "prompt", "deliver", "skills", "toolsets", "timezone", "catch_up", "enabled",
];

/// Reads `schedules:`; an entry without a schedule, or with neither prompt nor skills,
/// is an error of its own and left out.
pub fn read_schedules(r: &mut Reader, doc: &Node) -> Vec<ScheduleSettings> {
    let Some(block) = doc.get("schedules").filter(|n| !n.is_null()) else {
        return Vec::new();
    };
    if block.kind() != "a mapping" {
        r.error(
            Some(block),
            "schedules",
            "must be a mapping of job names to jobs",
        );
        return Vec::new();
    }
    block
        .entries()
        .iter()
        .filter_map(|(name, node)| read_one(r, name, node))
        .collect()
}

fn read_one(r: &mut Reader, name: &str, node: &Node) -> Option<ScheduleSettings> {
    let path = format!("schedules.{name}");
    if node.kind() != "a mapping" {
        r.error(
            Some(node),
            &path,
            "must be a mapping (schedule, prompt, deliver, ...)",
        );
        return None;
    }
    r.check_keys(node, &path, KEYS);
    let at = |key: &str| node.get(key).filter(|n| !n.is_null());
    let text = |r: &mut Reader, key: &str| {
        at(key)
            .and_then(|n| r.string(n, &format!("{path}.{key}")))
            .flatten()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    };
    let schedule = text(r, "schedule");
    let prompt = text(r, "prompt").unwrap_or_default();
    let deliver = text(r, "deliver");
    let timezone = text(r, "timezone");
    let catch_up = text(r, "catch_up");
    let skills = at("skills")
        .and_then(|n| r.string_list(n, &format!("{path}.skills")))
        .unwrap_or_default();
    let toolsets = at("toolsets").and_then(|n| r.string_list(n, &format!("{path}.toolsets")));
    let enabled = at("enabled")
        .and_then(|n| r.bool(n, &format!("{path}.enabled")))
        .unwrap_or(true);
    if let Some(c) = catch_up
        .as_deref()
        .filter(|c| !matches!(*c, "grace" | "always" | "skip"))
    {
        r.error(
            at("catch_up"),
            &format!("{path}.catch_up"),
            format!("`{c}` is not one of grace, always, skip"),
        );
        return None;
    }
    let Some(schedule) = schedule else {
        r.error(
            Some(node),
            &path,
            "has no `schedule` (`every 1h`, `0 9 * * *`, ...)",
        );
        return None;
    };
    if prompt.is_empty() && skills.is_empty() {
        r.error(Some(node), &path, "has neither `prompt` nor `skills`");
        return None;
    }
    Some(ScheduleSettings {
        name: name.to_owned(),
        schedule,
        prompt,
        deliver,
        skills,
        toolsets,
        timezone,
        catch_up,
        enabled,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(yaml: &str) -> (Vec<ScheduleSettings>, Vec<String>) {
        let doc = Node::parse_yaml(yaml).expect("yaml");
        let mut r = Reader::new(std::path::Path::new("config.yaml"));
        let s = read_schedules(&mut r, &doc);
        let problems = r
            .errors
            .iter()
            .chain(r.warnings.iter())
            .map(|p| p.to_string())
            .collect();
        (s, problems)
    }

    #[test]
    fn entries_are_read_and_a_broken_one_is_left_out_with_why() {
        let (s, p) = read(
            "schedules:\n  digest:\n    schedule: '0 9 * * *'\n    prompt: Sum up\n    deliver: telegram\n    skills: [github-code-review]\n    catch_up: skip\n  nothing:\n    prompt: x\n  odd:\n    schedule: every 1h\n    prompt: x\n    catch_up: later\n    colour: red\n",
        );
        assert_eq!(s.len(), 1, "{p:?}");
        assert_eq!(
            (
                s[0].name.as_str(),
                s[0].schedule.as_str(),
                s[0].deliver.as_deref(),
                s[0].enabled
            ),
            ("digest", "0 9 * * *", Some("telegram"), true)
        );
        let all = p.join("\n");
        assert!(
            all.contains("schedules.nothing") && all.contains("has no `schedule`"),
            "{all}"
        );
        assert!(
            all.contains("`later` is not one of grace, always, skip"),
            "{all}"
        );
        assert!(all.contains("colour"), "unknown keys are named: {all}");
        assert!(read("model: x\n").0.is_empty());
    }
}
