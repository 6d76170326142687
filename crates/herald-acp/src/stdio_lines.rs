//! `herald acp`'s stdin and stdout as the SDK's line transport, framed by herald's one
//! bounded line codec: a line that is not UTF-8 is answered `-32700` and one over
//! [`MAX_LINE`] `-32600`, here, and the connection goes on (as `herald rpc` does; the
//! SDK's own reader would end on either). Lines that are JSON or not go to the SDK,
//! which answers what it cannot parse.

use crate::AcpServer;
use futures_util::StreamExt;
use herald_jsonrpc::envelope::{self, ErrorObject};
use herald_jsonrpc::{Line, LineCodec};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc;
use tokio_util::codec::FramedRead;

/// The longest line read (an image prompt is base64 inside it).
pub const MAX_LINE: usize = 32 * 1024 * 1024;
/// Lines waiting for stdout at most (then the writers wait).
const OUTGOING: usize = 1024;

/// A line for the SDK, or the answer to a line that is no message (UTF-8 text that is
/// not JSON is left to the SDK).
pub fn refusal(line: Line) -> Result<String, String> {
    let refused =
        |code, message: &str| envelope::error(&Value::Null, &ErrorObject::new(code, message));
    match line {
        Line::Frame(bytes) => {
            String::from_utf8(bytes.to_vec()).map_err(|_| refused(-32700, "Parse error"))
        }
        Line::TooLong(_) => Err(refused(
            -32600,
            &format!("Invalid request: a line over {MAX_LINE} bytes"),
        )),
    }
}

pub async fn serve(server: Arc<AcpServer>) -> Result<(), agent_client_protocol::Error> {
    let (out, mut lines_out) = mpsc::channel::<String>(OUTGOING);
    let writer = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(mut line) = lines_out.recv().await {
            line.push('\n');
            if stdout.write_all(line.as_bytes()).await.is_err() {
                return;
            }
            if lines_out.is_empty() && stdout.flush().await.is_err() {
                return;
            }
        }
        let _ = stdout.flush().await;
    });
    let refusals = out.clone();
    let incoming =
        FramedRead::new(tokio::io::stdin(), LineCodec::new(MAX_LINE)).filter_map(move |read| {
            let refusals = refusals.clone();
            async move {
                match read.map(refusal) {
                    Ok(Ok(text)) => Some(Ok(text)),
                    Ok(Err(answer)) => {
                        let _ = refusals.send(answer).await;
                        None
                    }
                    Err(e) => Some(Err(e)),
                }
            }
        });
    let outgoing = futures_util::sink::unfold(out, |out, line: String| async move {
        out.send(line)
            .await
            .map_err(|_| std::io::Error::other("stdout is closed"))?;
        Ok::<_, std::io::Error>(out)
    });
    let served = crate::serve(
        server,
        agent_client_protocol::Lines::new(outgoing, incoming),
    )
    .await;
    // What is queued gets a moment to leave.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    served
}
