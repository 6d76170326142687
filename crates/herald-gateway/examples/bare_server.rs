//! The load script's baseline: a bare axum server that only reads the request body and
//! answers 200, on the same runtime and socket setup as herald.
//!
//! `cargo run --release -p herald-gateway --example bare_server -- 127.0.0.1:18645`

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use axum::serve::ListenerExt;

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
            let app = Router::new()
                .route(
                    "/webhooks/{route}",
                    post(|_body: Bytes| async { "{\"status\":\"ok\"}" }),
                )
                .fallback(|_body: Bytes| async { "{\"ok\":true,\"result\":{\"message_id\":1}}" });
            let listener = tokio::net::TcpListener::bind(&addr).await?.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            println!("bare server listening on http://{addr}");
            axum::serve(listener, app).await
        })
}
