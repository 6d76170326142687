//! Listing a server's tools (`tools/list`, page after page) within bounds that hold
//! *while* the pages come, not after: herald stops asking for pages once it keeps
//! [`MAX_TOOLS`] tools, once the pages' tools have weighed [`MAX_LIST_BYTES`] together,
//! or after [`MAX_PAGES`] pages. Each page is looked at and dropped before the next is
//! asked for, so a hostile server's endless cursor costs one page at a time (and one
//! page is itself bounded by the transport, [`crate::connection::MAX_MESSAGE`]).

use crate::connection::Connection;
use crate::server::ListedTool;
use rmcp::model::{PaginatedRequestParams, Tool};
use serde_json::Value;

/// At most this many pages of `tools/list` (as Hermes).
pub const MAX_PAGES: usize = 50;
/// At most this many tools of one server.
pub const MAX_TOOLS: usize = 256;
/// The pages' tools may weigh this much together (as JSON), kept or not. Four times
/// [`MAX_TOOLS`] tools of 16 KiB: a model's whole context (128k tokens, about 512 KB of
/// text) holds an eighth of it, and the largest real servers list well under 1 MiB.
pub const MAX_LIST_BYTES: usize = 4 << 20;
/// A tool description is cut to this many characters.
const MAX_DESCRIPTION: usize = 4096;
/// A tool whose input schema is larger than this (as JSON) is left out.
const MAX_SCHEMA_BYTES: usize = 64 * 1024;
/// Providers refuse longer tool names (OpenAI's limit).
const MAX_NAME: usize = 64;
/// Left-out names kept for the warning.
const NAMES_SHOWN: usize = 20;

/// Why the listing ended before the server's last page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    Pages,
    Tools,
    Bytes,
}

impl Stop {
    fn why(self) -> String {
        match self {
            Stop::Pages => format!("it has more than {MAX_PAGES} pages"),
            Stop::Tools => format!("{MAX_TOOLS} tools are kept"),
            Stop::Bytes => format!(
                "its tools weigh more than {} MiB together",
                MAX_LIST_BYTES >> 20
            ),
        }
    }
}

/// What a listing kept and left out.
#[derive(Debug, Default)]
pub struct Listing {
    pub kept: Vec<ListedTool>,
    /// How many tools seen were left out, and the first names.
    pub left_out: usize,
    pub left_out_names: Vec<String>,
    pub stopped: Option<Stop>,
}

impl Listing {
    fn leave_out(&mut self, name: &str) {
        self.left_out += 1;
        if self.left_out_names.len() < NAMES_SHOWN {
            self.left_out_names.push(name.to_owned());
        }
    }

    /// One warning for what was left out, if anything was.
    pub fn warn(&self, server: &str) {
        if let Some(stop) = self.stopped {
            tracing::warn!(
                server,
                kept = self.kept.len(),
                "MCP tools/list stopped because {}: the rest is left out",
                stop.why()
            );
        }
        if self.left_out > 0 {
            tracing::warn!(server, count = self.left_out, tools = ?self.left_out_names, "MCP tools left out: a name over {MAX_NAME} characters as mcp__<server>__<tool>, a schema over 64 KiB, or past the listing's bounds");
        }
    }
}

/// Lists `server`'s tools over `conn`, keeping those `keeps` (its `tools.include` and
/// `exclude`) lets through.
pub async fn list(
    conn: &Connection,
    server: &str,
    keeps: &(dyn Fn(&str) -> bool + Sync),
) -> Result<Listing, String> {
    let mut listing = Listing::default();
    let mut spent = 0usize;
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor
            .take()
            .map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let page =
            conn.service.list_tools(params).await.map_err(|e| {
                herald_llm::redact::shapes_redacted(&format!("tools/list failed: {e}"))
            })?;
        for tool in &page.tools {
            if listing.stopped.is_some() {
                listing.leave_out(&tool.name);
                continue;
            }
            spent = spent.saturating_add(json_len(tool));
            if spent > MAX_LIST_BYTES {
                listing.stopped = Some(Stop::Bytes);
                listing.leave_out(&tool.name);
                continue;
            }
            if !keeps(&tool.name) {
                continue;
            }
            match fits(server, tool) {
                true => listing.kept.push(listed_tool(tool)),
                false => listing.leave_out(&tool.name),
            }
            if listing.kept.len() >= MAX_TOOLS {
                listing.stopped = Some(Stop::Tools);
            }
        }
        if listing.stopped.is_some() {
            return Ok(listing);
        }
        match page.next_cursor.filter(|c| !c.is_empty()) {
            Some(next) => cursor = Some(next),
            None => return Ok(listing),
        }
    }
    listing.stopped = Some(Stop::Pages);
    Ok(listing)
}

/// Its name as the model sees it is short enough, and its schema small enough.
fn fits(server: &str, tool: &Tool) -> bool {
    let name = crate::naming::tool_name(server, &tool.name);
    name.len() <= MAX_NAME && json_len(&*tool.input_schema) <= MAX_SCHEMA_BYTES
}

fn listed_tool(t: &Tool) -> ListedTool {
    ListedTool {
        name: t.name.to_string(),
        description: t
            .description
            .as_deref()
            .map(|d| d.chars().take(MAX_DESCRIPTION).collect())
            .unwrap_or_default(),
        schema: crate::schema::normalized(&Value::Object((*t.input_schema).clone())),
    }
}

/// The length of `value` as JSON, counted without building the text.
fn json_len<T: serde::Serialize + ?Sized>(value: &T) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    match serde_json::to_writer(&mut count, value) {
        Ok(()) => count.0,
        // Cannot be written: weighs as much as anything may.
        Err(_) => usize::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_measured_without_being_written() {
        let v = serde_json::json!({"a": [1, 2, "three"]});
        assert_eq!(json_len(&v), v.to_string().len());
    }

    #[test]
    fn a_long_name_or_a_big_schema_does_not_fit() {
        let tool = |name: &str, schema: Value| {
            let Value::Object(s) = schema else { panic!() };
            Tool::new(name.to_owned(), "d", std::sync::Arc::new(s))
        };
        let small = serde_json::json!({"type": "object"});
        assert!(fits("srv", &tool("ok", small.clone())));
        assert!(!fits("srv", &tool(&"n".repeat(60), small)));
        let big = serde_json::json!({"type": "object", "description": "x".repeat(70_000)});
        assert!(!fits("srv", &tool("ok", big)));
    }
}
