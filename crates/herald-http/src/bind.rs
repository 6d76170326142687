//! Binding listeners: a host (every address it resolves to) or all interfaces.

use std::net::SocketAddr;
use tokio::net::TcpListener;

/// Why the listener could not start.
#[derive(Debug, thiserror::Error)]
pub enum BindError {
    #[error("cannot resolve bind host {host:?}: {source}")]
    Resolve {
        host: String,
        source: std::io::Error,
    },
    #[error(
        "cannot listen on {addr}: {source} (is another process using the port? set `{setting}`)"
    )]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
        /// The setting that chooses the port.
        setting: &'static str,
    },
}

/// Binds the listening sockets: the given host (every address it resolves to), or all
/// interfaces on IPv4 and IPv6 when no host is set; `setting` names the port's setting
/// in the error.
pub async fn bind(
    host: Option<&str>,
    port: u16,
    setting: &'static str,
) -> Result<Vec<TcpListener>, BindError> {
    let addrs: Vec<SocketAddr> = match host {
        None => vec![
            SocketAddr::from(([0, 0, 0, 0], port)),
            SocketAddr::from(([0u16; 8], port)),
        ],
        Some(h) => {
            let h = h.trim();
            let h = h
                .strip_prefix('[')
                .and_then(|x| x.strip_suffix(']'))
                .unwrap_or(h);
            let mut found: Vec<SocketAddr> = tokio::net::lookup_host((h, port))
                .await
                .map_err(|source| BindError::Resolve {
                    host: h.to_owned(),
                    source,
                })?
                .collect();
            found.dedup();
            found
        }
    };
    let mut listeners = Vec::new();
    let mut chosen_port = port;
    for (i, mut addr) in addrs.iter().copied().enumerate() {
        if chosen_port != 0 {
            addr.set_port(chosen_port);
        }
        match bind_one(addr) {
            Ok(l) => {
                if let Ok(local) = l.local_addr() {
                    chosen_port = local.port();
                }
                listeners.push(l);
            }
            // With no host, an IPv6 stack that is missing is not fatal.
            Err(e) if host.is_none() && i > 0 => {
                tracing::debug!(%addr, error = %e, "IPv6 listener not started");
            }
            Err(source) => {
                return Err(BindError::Bind {
                    addr,
                    source,
                    setting,
                });
            }
        }
    }
    Ok(listeners)
}

fn bind_one(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let domain = if addr.is_ipv6() {
        socket2::Domain::IPV6
    } else {
        socket2::Domain::IPV4
    };
    let socket = socket2::Socket::new(domain, socket2::Type::STREAM, Some(socket2::Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    TcpListener::from_std(socket.into())
}
