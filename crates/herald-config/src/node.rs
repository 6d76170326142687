//! A YAML (or JSON) document as a tree of nodes that remember where they were written,
//! so that every configuration error can name its line and column.

use crate::pyyaml;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::fmt;

/// One value of the document and where it starts (line 0 when it came from JSON).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub value: NodeValue,
    /// Where the key of this entry was written when the node is a mapping value, else
    /// where the value starts (line 0: unknown).
    pub line: u64,
    pub column: u64,
    /// Where the value's text (and, for a mapping value, its key's text) is in the
    /// source, as byte (offset, length): used to type plain scalars as PyYAML does.
    pub source: SourceSpans,
}

/// Byte spans of a node's text in its YAML source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SourceSpans {
    pub value: Option<(usize, usize)>,
    pub key: Option<(usize, usize)>,
}

/// The value of a node.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl Node {
    /// A node of a JSON document (no position).
    pub fn from_json(value: &Value) -> Node {
        let value = match value {
            Value::Null => NodeValue::Null,
            Value::Bool(b) => NodeValue::Bool(*b),
            Value::Number(n) => {
                let text = n.to_string();
                match text.parse::<i128>() {
                    Ok(i) => NodeValue::Int(i),
                    Err(_) => NodeValue::Float(text.parse().unwrap_or(f64::NAN)),
                }
            }
            Value::String(s) => NodeValue::Str(s.clone()),
            Value::Array(items) => NodeValue::Seq(items.iter().map(Node::from_json).collect()),
            Value::Object(map) => NodeValue::Map(
                map.iter()
                    .map(|(k, v)| (k.clone(), Node::from_json(v)))
                    .collect(),
            ),
        };
        Node::at(value, 0, 0)
    }

    /// A node without a source position.
    pub fn at(value: NodeValue, line: u64, column: u64) -> Node {
        Node {
            value,
            line,
            column,
            source: SourceSpans::default(),
        }
    }

    /// Parses a YAML document, typing plain scalars exactly as PyYAML's safe loader does.
    pub fn parse_yaml(text: &str) -> Result<Node, serde_saphyr::Error> {
        let mut doc: Node = serde_saphyr::from_str(text)?;
        doc.type_like_pyyaml(text);
        Ok(doc)
    }

    /// Types every plain, untagged scalar (values and mapping keys) again from its
    /// source text with PyYAML's rules.
    fn type_like_pyyaml(&mut self, text: &str) {
        match &mut self.value {
            NodeValue::Seq(items) => items.iter_mut().for_each(|i| i.type_like_pyyaml(text)),
            NodeValue::Map(entries) => {
                for (key, value) in entries.iter_mut() {
                    if let Some(raw) = value
                        .source
                        .key
                        .and_then(|(s, l)| pyyaml::plain_source(text, s, l))
                    {
                        *key = key_text(pyyaml::resolve_plain(raw), raw);
                    }
                    value.type_like_pyyaml(text);
                }
            }
            NodeValue::Null => {}
            scalar => {
                let Some(raw) = self
                    .source
                    .value
                    .and_then(|(s, l)| pyyaml::plain_source(text, s, l))
                else {
                    return;
                };
                // A plain string is its own source text; anything else was typed.
                if matches!(scalar, NodeValue::Str(s) if s != raw) {
                    return;
                }
                *scalar = pyyaml::resolve_plain(raw);
            }
        }
    }

    /// The node as a JSON value (filters and `deliver_extra` are kept as JSON).
    pub fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(i) => serde_json::from_str(&i.to_string()).unwrap_or(Value::Null),
            NodeValue::Float(f) => serde_json::Number::from_f64(*f)
                .map(Value::Number)
                .unwrap_or(Value::Null),
            NodeValue::Str(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.clone(), v.to_json()))
                    .collect(),
            ),
        }
    }

    /// The entry `key` of a mapping node (last one wins, as in YAML loaders).
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            NodeValue::Map(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The entries of a mapping node.
    pub fn entries(&self) -> &[(String, Node)] {
        match &self.value {
            NodeValue::Map(entries) => entries,
            _ => &[],
        }
    }

    pub fn is_null(&self) -> bool {
        matches!(self.value, NodeValue::Null)
    }

    /// A short name of the node's type, for error messages.
    pub fn kind(&self) -> &'static str {
        match self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Int(_) => "an integer",
            NodeValue::Float(_) => "a number",
            NodeValue::Str(_) => "a string",
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a mapping",
        }
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = serde_saphyr::Spanned::<NodeValue>::deserialize(deserializer)?;
        let span = spanned.defined.span();
        let value_span = span
            .byte_offset()
            .zip(span.byte_len())
            .and_then(|(o, l)| Some((usize::try_from(o).ok()?, usize::try_from(l).ok()?)));
        Ok(Node {
            value: spanned.value,
            line: spanned.referenced.line(),
            column: spanned.referenced.column(),
            source: SourceSpans {
                value: value_span,
                key: None,
            },
        })
    }
}

impl<'de> Deserialize<'de> for NodeValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(NodeVisitor)
    }
}

struct NodeVisitor;

impl<'de> Visitor<'de> for NodeVisitor {
    type Value = NodeValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<NodeValue, E> {
        Ok(NodeValue::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<NodeValue, E> {
        Ok(NodeValue::Int(v.into()))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<NodeValue, E> {
        Ok(NodeValue::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<NodeValue, E> {
        Ok(NodeValue::Int(v.into()))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<NodeValue, E> {
        Ok(i128::try_from(v)
            .map(NodeValue::Int)
            .unwrap_or(NodeValue::Float(v as f64)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<NodeValue, E> {
        Ok(NodeValue::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<NodeValue, E> {
        Ok(NodeValue::Str(v))
    }
    fn visit_unit<E: de::Error>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<NodeValue, E> {
        Ok(NodeValue::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<NodeValue, D::Error> {
        NodeValue::deserialize(d)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeValue, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<Node>()? {
            items.push(item);
        }
        Ok(NodeValue::Seq(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeValue, A::Error> {
        let mut entries = Vec::new();
        while let Some(key) = map.next_key::<Node>()? {
            let (key_line, key_column, key_span) = (key.line, key.column, key.source.value);
            let key = match key.value {
                NodeValue::Str(s) => s,
                NodeValue::Int(i) => i.to_string(),
                NodeValue::Bool(b) => b.to_string(),
                NodeValue::Float(f) => f.to_string(),
                NodeValue::Null => "null".to_owned(),
                NodeValue::Seq(_) | NodeValue::Map(_) => {
                    return Err(de::Error::custom("mapping keys must be plain scalars"));
                }
            };
            let mut value = map.next_value::<Node>()?;
            value.line = key_line;
            value.column = key_column;
            value.source.key = key_span;
            entries.push((key, value));
        }
        Ok(NodeValue::Map(entries))
    }
}

/// A mapping key's text: a string as written; a key PyYAML types (a boolean, a number)
/// in herald's spelling of that value.
fn key_text(value: NodeValue, raw: &str) -> String {
    match value {
        NodeValue::Str(s) => s,
        NodeValue::Bool(b) => b.to_string(),
        NodeValue::Int(i) => i.to_string(),
        NodeValue::Float(_) | NodeValue::Null | NodeValue::Seq(_) | NodeValue::Map(_) => {
            raw.to_owned()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_kept() {
        let doc = Node::parse_yaml("a:\n  b: 1\n  c: [x, 2.5, true, ~]\n").unwrap();
        let a = doc.get("a").unwrap();
        let b = a.get("b").unwrap();
        assert_eq!((b.line, b.value.clone()), (2, NodeValue::Int(1)));
        let c = a.get("c").unwrap();
        assert_eq!((c.line, c.column), (3, 3));
        assert_eq!(c.to_json(), serde_json::json!(["x", 2.5, true, null]));
    }

    #[test]
    fn scalars_are_typed_as_pyyaml_types_them() {
        let doc = Node::parse_yaml(
            "events: [y, n, 'yes']\nfield: n\nport: 017\nx: 1e5\ny: 1\nt: !!str yes\nb: yes\nk: &a y\nl: *a\nid: -100123456789\n",
        )
        .unwrap();
        assert_eq!(
            doc.to_json(),
            serde_json::json!({"events": ["y", "n", "yes"], "field": "n", "port": 15, "x": "1e5",
                "y": 1, "t": "yes", "b": true, "k": "y", "l": "y", "id": -100123456789i64})
        );
    }
}
