//! What every platform's HTTP client needs: answers read within a size, and network
//! errors told without their URL (a Bot API URL holds its token).

/// Reads a body, refusing one larger than `max`.
pub(crate) async fn read_capped(
    mut resp: reqwest::Response,
    max: usize,
) -> Result<Vec<u8>, String> {
    let too_big = || format!("answer larger than {max} bytes");
    if resp.content_length().is_some_and(|n| n > max as u64) {
        return Err(too_big());
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| describe(&e))? {
        if body.len() + chunk.len() > max {
            return Err(too_big());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// A network error in words, without the URL.
pub(crate) fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "cannot connect"
    } else {
        "request failed"
    };
    let mut source = std::error::Error::source(e);
    let mut detail = String::new();
    while let Some(s) = source {
        detail = s.to_string();
        source = s.source();
    }
    match detail.is_empty() {
        true => kind.to_owned(),
        false => format!("{kind}: {detail}"),
    }
}
