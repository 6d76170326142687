//! `herald rpc`: the JSON-RPC gateway on stdio, or on WebSocket with `--ws HOST:PORT`.

use anyhow::Context;
use herald_config::Home;
use herald_http::ConnectionLimits;
use herald_rpc::Gateway;
use herald_session::{HostBuilder, Platform, toolsets};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

#[derive(clap::Args, Debug)]
pub struct RpcArgs {
    /// Serve on WebSocket at ws://HOST:PORT/api/ws instead of stdio.
    #[arg(long, value_name = "HOST:PORT")]
    ws: Option<String>,
    /// The bearer token WebSocket clients must send (required off loopback; also
    /// HERALD_RPC_TOKEN).
    #[arg(long, env = "HERALD_RPC_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

pub fn run(home: &Home, args: RpcArgs) -> anyhow::Result<ExitCode> {
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    tokio_rt.block_on(async {
        let built = match HostBuilder::new(home, Platform::Tui).build() {
            Ok(b) => b,
            Err(e) => {
                eprintln!("herald: {e}");
                return Ok(ExitCode::FAILURE);
            }
        };
        let tools = toolsets::resolve(&Platform::Tui.default_toolsets(&built.config)).0;
        let gw = Gateway::new(built.start().await, tools);
        match args.ws {
            None => serve_stdio(gw).await,
            Some(addr) => serve_ws(gw, &addr, args.token).await,
        }
    })
}

async fn serve_stdio(gw: Arc<Gateway>) -> anyhow::Result<ExitCode> {
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    herald_rpc::stdio::serve(gw, input, tokio::io::stdout())
        .await
        .context("reading stdin")?;
    Ok(ExitCode::SUCCESS)
}

fn is_loopback(host: &str) -> bool {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

async fn serve_ws(gw: Arc<Gateway>, addr: &str, token: Option<String>) -> anyhow::Result<ExitCode> {
    let Some((host, port)) = addr.rsplit_once(':') else {
        eprintln!("herald: --ws takes HOST:PORT (for example 127.0.0.1:8765)");
        return Ok(ExitCode::from(2));
    };
    let Ok(port) = port.parse::<u16>() else {
        eprintln!("herald: --ws: {port:?} is not a port number");
        return Ok(ExitCode::from(2));
    };
    let token = token.filter(|t| !t.trim().is_empty());
    if token.is_none() && !is_loopback(host) {
        eprintln!(
            "herald: --ws on {host} (not loopback) needs a bearer token: --token or HERALD_RPC_TOKEN"
        );
        return Ok(ExitCode::FAILURE);
    }
    let listeners = match herald_http::bind(Some(host), port, "--ws").await {
        Ok(l) => l,
        Err(e) => {
            eprintln!("herald: {e}");
            return Ok(ExitCode::FAILURE);
        }
    };
    for l in &listeners {
        if let Ok(a) = l.local_addr() {
            outln!("herald: JSON-RPC gateway listening on ws://{a}/api/ws");
        }
    }
    let limits = ConnectionLimits {
        max_connections: 1024,
        header_timeout: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(60),
        shutdown_grace: Duration::from_secs(2),
    }
    .within_fd_limit();
    let app = herald_rpc::ws::router(gw, token);
    herald_http::serve(
        listeners,
        app,
        limits,
        crate::gateway_cmd::shutdown_signal(),
    )
    .await?;
    Ok(ExitCode::SUCCESS)
}
