//! The gateway's own listening sockets: the daemon (MCP and the dashboard), the OAuth
//! redirect listeners, the browser's policy proxy and its debugging endpoint. Nothing the
//! agent drives may connect to them — a browser that opens the dashboard can answer its own
//! approvals — so every connection a tool makes on the agent's behalf is checked here on the
//! address it actually goes to (after every name is resolved), whatever the names and allow
//! lists say.
//!
//! The gateway registers each listener while it is open. The daemon's port is also read from
//! `AAI_HOME/run/serve.json` at each check: a stdio gateway's browser must not reach a daemon
//! another process runs.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

static OPEN: Mutex<BTreeMap<u64, SocketAddr>> = Mutex::new(BTreeMap::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// One of the gateway's listeners, known as such until this is dropped.
#[must_use = "the listener is forgotten as soon as this is dropped"]
#[derive(Debug)]
pub struct Registered(u64);

impl Drop for Registered {
    fn drop(&mut self) {
        let mut open = OPEN
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        open.remove(&self.0);
    }
}

/// Registers a listener of the gateway at `addr` (as bound: `127.0.0.1:7377`).
pub fn register(addr: SocketAddr) -> Registered {
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut open = OPEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    open.insert(id, addr);
    Registered(id)
}

/// The ports the gateway listens on now: the registered listeners, and the daemon's port
/// from `home/run/serve.json` when `home` is given.
pub fn ports(home: Option<&Path>) -> BTreeSet<u16> {
    let mut ports: BTreeSet<u16> = OPEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .values()
        .map(SocketAddr::port)
        .collect();
    if let Some(port) = home.and_then(daemon_port) {
        ports.insert(port);
    }
    ports
}

/// The daemon's port as its runtime file says (a stale file counts: refusing a port nobody
/// listens on costs nothing).
fn daemon_port(home: &Path) -> Option<u16> {
    let bytes = std::fs::read(home.join("run").join("serve.json")).ok()?;
    let info: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    let url = url::Url::parse(info.get("url")?.as_str()?).ok()?;
    url.port_or_known_default()
}

/// Why a connection to `addr` is refused, when it would reach one of the gateway's own
/// listeners: its port is one of theirs and its address is this host (any loopback address,
/// the unspecified address, or an address of one of this host's interfaces).
pub fn refusal(addr: SocketAddr, home: Option<&Path>) -> Option<String> {
    if !ports(home).contains(&addr.port()) || !is_this_host(addr.ip()) {
        return None;
    }
    Some(format!(
        "{addr} is the gateway's own listener (its daemon, dashboard, sign-in redirect or browser control): no tool may connect to it, whatever browser.allow says"
    ))
}

/// Whether `ip` is this host: loopback (all of 127/8 and `::1`), the unspecified address
/// (which connects to this host), or an address of one of its interfaces — the kernel lets a
/// socket bind only to those, which answers the question without listing the interfaces.
pub fn is_this_host(ip: IpAddr) -> bool {
    let ip = ip.to_canonical();
    ip.is_loopback() || ip.is_unspecified() || UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_host_in_every_spelling() {
        for ip in [
            "127.0.0.1",
            "127.1.2.3",
            "0.0.0.0",
            "::1",
            "::",
            "::ffff:127.0.0.1",
        ] {
            assert!(is_this_host(ip.parse().expect("ip")), "{ip}");
        }
        // An address of no interface here (TEST-NET-3, documentation prefix).
        for ip in ["203.0.113.9", "2001:db8::1", "8.8.8.8"] {
            assert!(!is_this_host(ip.parse().expect("ip")), "{ip}");
        }
    }

    /// A registered listener is refused on every address of this host until it is dropped;
    /// other ports and other hosts are not.
    #[test]
    fn registered_listeners_and_the_daemons_runtime_file() {
        let socket = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = socket.local_addr().expect("addr");
        let port = addr.port();
        let registered = register(addr);
        for host in [
            "127.0.0.1",
            "127.9.9.9",
            "0.0.0.0",
            "::1",
            "::ffff:127.0.0.1",
        ] {
            let ip: IpAddr = host.parse().expect("ip");
            assert!(refusal(SocketAddr::new(ip, port), None).is_some(), "{host}");
        }
        assert!(
            refusal(
                SocketAddr::new("203.0.113.9".parse().expect("ip"), port),
                None
            )
            .is_none()
        );
        drop(registered);
        assert!(refusal(addr, None).is_none());

        let home = tempfile::tempdir().expect("home");
        std::fs::create_dir_all(home.path().join("run")).expect("run");
        std::fs::write(
            home.path().join("run/serve.json"),
            format!(r#"{{"url": "http://127.0.0.1:{port}/mcp", "pid": 1}}"#),
        )
        .expect("serve.json");
        assert!(refusal(addr, Some(home.path())).is_some());
        assert!(refusal(addr, None).is_none());
    }
}
