//! Reading a request body within its size limit and its deadline, for every front door
//! that takes bodies. A body that has already arrived with its head (most do) needs no
//! timer; one still on its way must arrive within the body timeout, so a client that
//! sends a few bytes a second cannot hold a connection and its buffer for long.

use axum::body::Body;
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use std::future::Future;
use std::task::Poll;
use std::time::Duration;

/// Why a body was not read.
#[derive(Debug, thiserror::Error)]
pub enum BodyError {
    #[error("over the limit of {0} bytes")]
    TooLarge(usize),
    #[error("not received within {} s", .0.as_secs())]
    TimedOut(Duration),
    #[error("broken body: {0}")]
    Broken(String),
}

/// The body, at most `limit` bytes, received within `timeout`.
pub async fn read(body: Body, limit: usize, timeout: Duration) -> Result<Bytes, BodyError> {
    let limited = Limited::new(body, limit).collect();
    let mut limited = std::pin::pin!(limited);
    let first = std::future::poll_fn(|cx| Poll::Ready(limited.as_mut().poll(cx))).await;
    let read = match first {
        Poll::Ready(read) => read,
        Poll::Pending => tokio::time::timeout(timeout, limited)
            .await
            .map_err(|_| BodyError::TimedOut(timeout))?,
    };
    match read {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.is::<LengthLimitError>() => Err(BodyError::TooLarge(limit)),
        Err(e) => Err(BodyError::Broken(e.to_string())),
    }
}
