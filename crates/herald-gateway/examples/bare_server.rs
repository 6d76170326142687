//! The load script's baseline: a bare axum server that only reads the request body and
//! answers 200, on the same runtime and socket setup as herald. With
//! `BARE_SERVER_SECRET` set it is a bare *verifying* server: it checks each request's
//! signature with herald's verifier and answers 401 when it fails.
//!
//! `cargo run --release -p herald-gateway --example bare_server -- 127.0.0.1:18645`

use axum::Router;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::serve::ListenerExt;
use herald_webhook::SystemClock;

fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:18645".to_owned());
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?
        .block_on(async move {
            // Any other request answers like an instant Telegram Bot API: the load
            // script's direct-delivery mix uses this server as herald's target.
            let secret = std::env::var("BARE_SERVER_SECRET").ok();
            let app = Router::new()
                .route(
                    "/webhooks/{route}",
                    post(move |headers: HeaderMap, body: Bytes| async move {
                        let verified = secret.as_deref().is_none_or(|secret| {
                            herald_webhook::verify(secret, &headers, &body, &SystemClock).is_ok()
                        });
                        if verified {
                            (StatusCode::OK, "{\"status\":\"ok\"}")
                        } else {
                            (
                                StatusCode::UNAUTHORIZED,
                                "{\"error\":\"Invalid signature\"}",
                            )
                        }
                    }),
                )
                .fallback(|_body: Bytes| async { "{\"ok\":true,\"result\":{\"message_id\":1}}" });
            let listener = tokio::net::TcpListener::bind(&addr).await?.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            println!("bare server listening on http://{addr}");
            axum::serve(listener, app).await
        })
}
