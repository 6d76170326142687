//! `herald rpc` on stdio: newline-delimited frames on stdin, frames on stdout (logs go
//! to stderr); the server ends on stdin's EOF.

use crate::connection::{Client, MAX_FRAME, ready};
use crate::gateway::Gateway;
use crate::outbox::Outgoing;
use futures_util::StreamExt;
use herald_jsonrpc::{Line, LineCodec};
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::FramedRead;

/// Writes every item as one line, flushing when nothing more is waiting.
async fn write_frames(mut rx: Outgoing, mut output: impl AsyncWrite + Unpin) {
    while let Some(out) = rx.recv().await {
        let mut line = out.render();
        line.push('\n');
        if output.write_all(line.as_bytes()).await.is_err() {
            return;
        }
        if rx.is_empty() && output.flush().await.is_err() {
            return;
        }
    }
    let _ = output.flush().await;
}

/// Serves one client on a byte stream pair until its input ends.
pub async fn serve(
    gw: Arc<Gateway>,
    input: impl AsyncRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> std::io::Result<()> {
    let (outbox, rx) = gw.connect();
    let writer = tokio::spawn(write_frames(rx, output));
    outbox.frame(ready()).await;
    let mut client = Client::new(gw, outbox);
    let mut lines = FramedRead::new(input, LineCodec::new(MAX_FRAME));
    let read = loop {
        match lines.next().await {
            Some(Ok(Line::Frame(f))) => client.take(&f).await,
            Some(Ok(Line::TooLong(_))) => client.too_large().await,
            None => break Ok(()),
            Some(Err(e)) => break Err(e),
        }
    };
    client.finish().await;
    // Live sessions may still hold the outbox: what is queued gets a moment to leave.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
    read
}
