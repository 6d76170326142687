//! `herald rpc` on stdio: newline-delimited frames on stdin, frames on stdout (logs go
//! to stderr); the server ends on stdin's EOF.

use crate::connection::{Client, MAX_FRAME, ready};
use crate::gateway::Gateway;
use crate::outbox::Out;
use std::sync::Arc;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

/// One frame read, or why not.
enum Read {
    Frame(Vec<u8>),
    TooLarge,
    Eof,
}

/// Reads up to the next newline, keeping at most [`MAX_FRAME`] bytes.
async fn read_frame(input: &mut (impl AsyncBufRead + Unpin)) -> std::io::Result<Read> {
    let mut frame = Vec::new();
    let mut over = false;
    loop {
        let buf = input.fill_buf().await?;
        if buf.is_empty() {
            return Ok(match (frame.is_empty() && !over, over) {
                (true, _) => Read::Eof,
                (_, true) => Read::TooLarge,
                _ => Read::Frame(frame),
            });
        }
        let (taken, done) = match memchr(buf) {
            Some(i) => (i + 1, true),
            None => (buf.len(), false),
        };
        if !over && frame.len() + taken <= MAX_FRAME + 1 {
            frame.extend_from_slice(&buf[..taken]);
        } else {
            over = true;
            frame.clear();
        }
        input.consume(taken);
        if done {
            return Ok(if over {
                Read::TooLarge
            } else {
                Read::Frame(frame)
            });
        }
    }
}

fn memchr(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|b| *b == b'\n')
}

/// Writes every item as one line, flushing when nothing more is waiting.
async fn write_frames(mut rx: mpsc::Receiver<Out>, mut output: impl AsyncWrite + Unpin) {
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
    mut input: impl AsyncBufRead + Unpin,
    output: impl AsyncWrite + Unpin + Send + 'static,
) -> std::io::Result<()> {
    let (outbox, rx) = gw.connect();
    let writer = tokio::spawn(write_frames(rx, output));
    outbox.frame(ready()).await;
    let mut client = Client::new(gw, outbox);
    let read = loop {
        match read_frame(&mut input).await {
            Ok(Read::Frame(f)) => client.take(&f).await,
            Ok(Read::TooLarge) => client.too_large().await,
            Ok(Read::Eof) => break Ok(()),
            Err(e) => break Err(e),
        }
    };
    client.finish().await;
    // Live sessions may still hold the outbox: what is queued gets a moment to leave.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), writer).await;
    read
}
