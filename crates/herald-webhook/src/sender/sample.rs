//! A realistic sample delivery per preset (bundled), made ready to send: a fresh
//! delivery id, the event type asked for, Linear's timestamp stamped. For
//! `herald webhook test`.

use super::Sender;
use super::fields::{event_headers, event_paths, id_headers, id_paths};
use serde_json::{Map, Value};

/// A sample: the sender's own non-signature headers and the body's text.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    pub headers: Vec<(String, String)>,
    /// A JSON object, or form text (Twilio).
    pub body: Value,
}

/// The bundled sample of a preset.
pub fn bundled(sender: Sender) -> Sample {
    let text = match sender {
        Sender::Stripe => include_str!("../../samples/stripe.json"),
        Sender::Jira => include_str!("../../samples/jira.json"),
        Sender::Shopify => include_str!("../../samples/shopify.json"),
        Sender::Slack => include_str!("../../samples/slack.json"),
        Sender::Linear => include_str!("../../samples/linear.json"),
        Sender::Pagerduty => include_str!("../../samples/pagerduty.json"),
        Sender::Sentry => include_str!("../../samples/sentry.json"),
        Sender::Paddle => include_str!("../../samples/paddle.json"),
        Sender::Bitbucket => include_str!("../../samples/bitbucket.json"),
        Sender::Gitea => include_str!("../../samples/gitea.json"),
        Sender::Forgejo => include_str!("../../samples/forgejo.json"),
        Sender::Twilio => include_str!("../../samples/twilio.json"),
        Sender::Discord => include_str!("../../samples/discord.json"),
        Sender::Token => include_str!("../../samples/token.json"),
        Sender::StandardWebhooks => include_str!("../../samples/standard-webhooks.json"),
        Sender::Svix => include_str!("../../samples/svix.json"),
    };
    let doc: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    let headers = doc["headers"]
        .as_object()
        .map(|h| {
            h.iter()
                .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                .collect()
        })
        .unwrap_or_default();
    Sample {
        headers,
        body: doc.get("body").cloned().unwrap_or(Value::Null),
    }
}

impl Sample {
    /// Gives the sample the delivery id `id` where the preset reads it (so a repeated
    /// test is not a duplicate).
    pub fn set_delivery_id(&mut self, sender: Sender, id: &str) {
        if let Some(name) = id_headers(sender).first() {
            self.set_header(name, id);
        } else if let Some(path) = id_paths(sender).first() {
            self.set_path(path, Value::String(id.to_owned()));
        } else if sender == Sender::Twilio {
            self.set_header("i-twilio-idempotency-token", id);
        } else if sender == Sender::Token {
            // As without a preset: the first of the generic id headers a sender can set.
            self.set_header("x-request-id", id);
        }
    }

    /// Gives the sample the event type `event` where the preset reads it.
    pub fn set_event_type(&mut self, sender: Sender, event: &str) {
        if matches!(
            sender,
            Sender::Token | Sender::StandardWebhooks | Sender::Svix
        ) {
            // Detected as without a preset: the Standard Webhooks header, else `type`.
            let named = self
                .headers
                .iter()
                .any(|(k, _)| k.eq_ignore_ascii_case("webhook-event-type"));
            if named {
                self.set_header("webhook-event-type", event);
            } else {
                self.set_path(&["type"], Value::String(event.to_owned()));
            }
        } else if let Some(name) = event_headers(sender).first() {
            self.set_header(name, event);
        } else if let Some(path) = event_paths(sender).first() {
            let value = match sender {
                Sender::Discord => event
                    .parse::<i64>()
                    .map_or_else(|_| Value::String(event.to_owned()), Value::from),
                _ => Value::String(event.to_owned()),
            };
            self.set_path(path, value);
        }
    }

    /// The body's bytes as sent.
    pub fn body_text(&self) -> String {
        match &self.body {
            Value::String(form) => form.clone(),
            other => other.to_string(),
        }
    }

    /// The body as a JSON object, when it is one.
    pub fn payload_mut(&mut self) -> Option<&mut Map<String, Value>> {
        self.body.as_object_mut()
    }

    fn set_header(&mut self, name: &str, value: &str) {
        self.headers.retain(|(k, _)| !k.eq_ignore_ascii_case(name));
        self.headers.push((name.to_owned(), value.to_owned()));
    }

    fn set_path(&mut self, path: &[&str], value: Value) {
        let Some((last, parents)) = path.split_last() else {
            return;
        };
        if let Value::String(form) = &self.body {
            let text = match &value {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            self.body = Value::String(set_form_field(form, last, &text));
            return;
        }
        let Some(mut map) = self.body.as_object_mut() else {
            return;
        };
        for key in parents {
            let entry = map
                .entry((*key).to_owned())
                .or_insert_with(|| Value::Object(Map::new()));
            let Some(inner) = entry.as_object_mut() else {
                return;
            };
            map = inner;
        }
        map.insert((*last).to_owned(), value);
    }
}

/// Form text with `name` set to `value` (replaced where present, else appended).
fn set_form_field(form: &str, name: &str, value: &str) -> String {
    let mut pairs: Vec<(String, String)> = form_urlencoded::parse(form.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    match pairs.iter_mut().find(|(k, _)| k == name) {
        Some(pair) => pair.1 = value.to_owned(),
        None => pairs.push((name.to_owned(), value.to_owned())),
    }
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(pairs)
        .finish()
}
