//! `herald rpc`: the JSON-RPC gateway on stdio, or on WebSocket with `--ws HOST:PORT`.

use anyhow::Context;
use herald_app::HostFor;
use herald_app::rpc_server::STOP_WITHIN;
use herald_config::Home;
use herald_config::metrics_settings::MetricsSettings;
use herald_rpc::Gateway;
use herald_session::Platform;
use std::process::ExitCode;
use std::sync::Arc;

#[derive(clap::Args, Debug)]
pub struct RpcArgs {
    /// Serve on WebSocket at ws://HOST:PORT/api/ws instead of stdio.
    #[arg(long, value_name = "HOST:PORT")]
    ws: Option<String>,
    /// The bearer token WebSocket clients must send, at least 16 characters (also
    /// HERALD_RPC_TOKEN). Without one (nor --token-file), herald makes one and prints
    /// the ready ws://…/api/ws?token=… URL once.
    #[arg(
        long,
        env = "HERALD_RPC_TOKEN",
        hide_env_values = true,
        allow_hyphen_values = true
    )]
    token: Option<String>,
    /// Read the token from this file (its first line), keeping it out of the process list.
    #[arg(long, value_name = "PATH", conflicts_with = "token")]
    token_file: Option<std::path::PathBuf>,
    /// A web origin allowed to connect (repeatable, e.g. http://localhost:3000). An
    /// upgrade that carries any other Origin header is refused with 403; clients that
    /// send none (the Hermes TUI, scripts) need only the token.
    #[arg(long = "allow-origin", value_name = "ORIGIN")]
    allow_origins: Vec<String>,
}

/// The shortest token accepted, as the API refuses short keys.
const MIN_TOKEN: usize = 16;

/// The WebSocket token: given, read from a file, or made here (then `true`).
fn token_of(args: &RpcArgs) -> Result<(String, bool), String> {
    let given = match (&args.token, &args.token_file) {
        (Some(t), _) => Some(t.trim().to_owned()),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("--token-file {}: {e}", path.display()))?;
            Some(text.lines().next().unwrap_or_default().trim().to_owned())
        }
        (None, None) => None,
    };
    match given {
        Some(t) if t.chars().count() < MIN_TOKEN => Err(format!(
            "the WebSocket token is too short: at least {MIN_TOKEN} characters"
        )),
        Some(t) => Ok((t, false)),
        None => Ok((uuid::Uuid::new_v4().simple().to_string(), true)),
    }
}

pub fn run(home: &Home, args: RpcArgs) -> anyhow::Result<ExitCode> {
    let tokio_rt = herald_app::runtime().context("cannot start the async runtime")?;
    let code = tokio_rt.block_on(async {
        let door = HostFor::serving(home, Platform::Tui);
        let opened = match herald_app::open_interactive(door).await {
            Ok(o) => o,
            Err(e) => {
                eprintln!("herald: {e}");
                return Ok(ExitCode::FAILURE);
            }
        };
        let metrics = opened.config.metrics.clone();
        let gw = Gateway::new(opened.host.clone(), opened.tool_names.clone());
        let served = match &args.ws {
            None => serve_stdio(gw.clone()).await,
            Some(addr) => serve_ws(gw.clone(), addr, &args, metrics).await,
        };
        opened.stop_runs(STOP_WITHIN).await;
        gw.finalize_sessions().await;
        opened.finish().await;
        served
    });
    // stdin's reader may still be blocked in a read: do not wait for it.
    tokio_rt.shutdown_background();
    code
}

/// Serves stdin until it closes or a SIGTERM or SIGINT comes.
async fn serve_stdio(gw: Arc<Gateway>) -> anyhow::Result<ExitCode> {
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    tokio::select! {
        served = herald_rpc::stdio::serve(gw, input, tokio::io::stdout()) => {
            served.context("reading stdin")?;
        }
        () = herald_app::signals::shutdown_signal() => {}
    }
    Ok(ExitCode::SUCCESS)
}

async fn serve_ws(
    gw: Arc<Gateway>,
    addr: &str,
    args: &RpcArgs,
    metrics: MetricsSettings,
) -> anyhow::Result<ExitCode> {
    let Some((host, port)) = addr.rsplit_once(':') else {
        eprintln!("herald: --ws takes HOST:PORT (for example 127.0.0.1:8765)");
        return Ok(ExitCode::from(2));
    };
    let Ok(port) = port.parse::<u16>() else {
        eprintln!("herald: --ws: {port:?} is not a port number");
        return Ok(ExitCode::from(2));
    };
    let (token, made) = match token_of(args) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("herald: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let origins = match herald_rpc::ws::Origins::parse(&args.allow_origins) {
        Ok(o) => o,
        Err(e) => {
            eprintln!("herald: --allow-origin: {e}");
            return Ok(ExitCode::from(2));
        }
    };
    let listen = herald_app::rpc_server::WsListen {
        host,
        port,
        token: &token,
        origins,
        metrics,
    };
    let say = |url: &str| {
        outln!("herald: JSON-RPC gateway listening on {url}");
        // Said once, as Jupyter does: the token was made for this run.
        if made {
            outln!("herald: connect with {url}?token={token}");
        }
    };
    let served =
        herald_app::rpc_server::serve_ws(gw, listen, &say, herald_app::signals::shutdown_signal());
    match served.await {
        Ok(()) => {}
        Err(herald_app::rpc_server::WsError::Bind(e)) => {
            eprintln!("herald: {e}");
            return Ok(ExitCode::FAILURE);
        }
        Err(herald_app::rpc_server::WsError::Io(e)) => return Err(e.into()),
    }
    Ok(ExitCode::SUCCESS)
}
