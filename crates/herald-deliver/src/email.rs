//! `email`: SMTP through lettre, with implicit TLS (port 465), STARTTLS (default) or a
//! plain connection for local relays.

use crate::{OutgoingMessage, Receipt, SendError, SendFuture, Target};
use lettre::message::{Mailbox, header::ContentType};
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Tls, TlsParameters};
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use std::time::Duration;

/// How the SMTP connection is secured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SmtpSecurity {
    /// TLS from the first byte (port 465).
    Tls,
    /// Plain connection upgraded with STARTTLS (required).
    StartTls,
    /// No TLS (local relays, tests).
    None,
}

impl SmtpSecurity {
    pub fn parse(value: Option<&str>, port: u16) -> SmtpSecurity {
        match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
            Some("tls" | "ssl" | "smtps") => SmtpSecurity::Tls,
            Some("none" | "plain" | "off") => SmtpSecurity::None,
            Some("starttls") => SmtpSecurity::StartTls,
            _ if port == 465 => SmtpSecurity::Tls,
            _ => SmtpSecurity::StartTls,
        }
    }
}

pub struct Email {
    pub host: Option<String>,
    pub port: u16,
    pub security: SmtpSecurity,
    pub address: Option<String>,
    pub password: Option<String>,
    pub home_address: Option<String>,
}

impl Email {
    async fn send_mail(&self, message: &OutgoingMessage) -> Result<Receipt, SendError> {
        let host = self
            .host
            .as_deref()
            .ok_or_else(|| SendError::permanent("email: no SMTP server: set EMAIL_SMTP_HOST"))?;
        let from = self
            .address
            .as_deref()
            .ok_or_else(|| SendError::permanent("email: no sender: set EMAIL_ADDRESS"))?;
        let to = message
            .extra_text("to")
            .or_else(|| message.extra_text("chat_id"))
            .or_else(|| self.home_address.clone())
            .ok_or_else(|| {
                SendError::permanent(
                    "email: no recipient: set deliver_extra.to (or chat_id) or EMAIL_HOME_ADDRESS",
                )
            })?;
        let from: Mailbox = from
            .parse()
            .map_err(|e| SendError::permanent(format!("email: sender {from:?}: {e}")))?;
        let to_box: Mailbox = to
            .parse()
            .map_err(|e| SendError::permanent(format!("email: recipient {to:?}: {e}")))?;
        let subject = message.extra_text("subject").unwrap_or_else(|| {
            let first: String = message
                .text
                .lines()
                .next()
                .unwrap_or("")
                .chars()
                .take(80)
                .collect();
            if first.is_empty() {
                "herald".to_owned()
            } else {
                first
            }
        });
        let email = lettre::Message::builder()
            .from(from)
            .to(to_box)
            .subject(subject)
            .header(ContentType::TEXT_PLAIN)
            .body(message.text.clone())
            .map_err(|e| SendError::permanent(format!("email: cannot build the message: {e}")))?;
        let builder = match self.security {
            SmtpSecurity::None => AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host),
            SmtpSecurity::Tls | SmtpSecurity::StartTls => {
                let _ = rustls::crypto::ring::default_provider().install_default();
                let params = TlsParameters::new(host.to_owned()).map_err(|e| {
                    SendError::permanent(format!("email: TLS setup for {host}: {e}"))
                })?;
                let tls = if self.security == SmtpSecurity::Tls {
                    Tls::Wrapper(params)
                } else {
                    Tls::Required(params)
                };
                AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(host).tls(tls)
            }
        };
        let mut builder = builder
            .port(self.port)
            .timeout(Some(Duration::from_secs(20)));
        if let (Some(user), Some(password)) = (&self.address, &self.password) {
            builder = builder.credentials(Credentials::new(user.clone(), password.clone()));
        }
        let transport = builder.build();
        match transport.send(email).await {
            Ok(response) => Ok(Receipt {
                message_ids: response.message().map(str::to_owned).take(1).collect(),
            }),
            Err(e) if e.is_permanent() => Err(SendError::permanent(format!(
                "email: SMTP rejected the message: {e}"
            ))),
            Err(e) => Err(SendError::transient(format!("email: {e}"), None)),
        }
    }
}

impl Target for Email {
    fn name(&self) -> &str {
        "email"
    }
    fn send<'a>(&'a self, message: &'a OutgoingMessage) -> SendFuture<'a> {
        Box::pin(self.send_mail(message))
    }
}
