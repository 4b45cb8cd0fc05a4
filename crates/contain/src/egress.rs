//! The network of a contained process: a network namespace of its own whose only way out is
//! the gateway's egress proxy.
//!
//! The second stage moves into a new network namespace with its user and mount namespaces
//! (nothing there but a loopback interface, which it brings up), listens on the proxy's port
//! on that loopback, and stops itself. The first stage — still in the user's network — takes
//! that listening socket from it (`pidfd_getfd`) and forwards every connection made to it to
//! the gateway's proxy on the real loopback, which lets through only what the egress policy
//! allows (see `aai_local::egress`). The command finds the proxy in its environment
//! ([`PROXY_VARS`]); a program that ignores those variables reaches nothing at all.

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd as _;

use crate::ContainError;

/// The variables that point programs at the proxy (`http://127.0.0.1:PORT`): curl, git,
/// cargo, pip, npm, wget and most HTTP libraries read one of them.
pub const PROXY_VARS: &[&str] = &[
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "npm_config_proxy",
    "npm_config_https_proxy",
    "CARGO_HTTP_PROXY",
];

/// Variables that would send a program around the proxy: removed.
pub const BYPASS_VARS: &[&str] = &["NO_PROXY", "no_proxy", "npm_config_noproxy"];

/// The proxy's address as the variables give it.
pub fn proxy_url(port: u16) -> String {
    format!("http://127.0.0.1:{port}")
}

/// Brings up the loopback interface of this (new) network namespace: one `RTM_NEWLINK`
/// request over route netlink, for interface 1 (the loopback is always the first).
///
/// # Errors
/// The request cannot be sent or the kernel refuses it.
pub fn loopback_up() -> Result<(), ContainError> {
    use nix::sys::socket::{
        AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol, SockType, recv, sendto,
        socket,
    };
    let fail = |step: &str| ContainError::namespace(format!("bring up the loopback ({step})"));
    let fd = socket(
        AddressFamily::Netlink,
        SockType::Raw,
        SockFlag::SOCK_CLOEXEC,
        SockProtocol::NetlinkRoute,
    )
    .map_err(fail("socket"))?;
    const RTM_NEWLINK: u16 = 16;
    const NLM_F_REQUEST: u16 = 1;
    const NLM_F_ACK: u16 = 4;
    const IFF_UP: u32 = 1;
    let mut message = Vec::with_capacity(32);
    message.extend(32u32.to_ne_bytes());
    message.extend(RTM_NEWLINK.to_ne_bytes());
    message.extend((NLM_F_REQUEST | NLM_F_ACK).to_ne_bytes());
    message.extend(1u32.to_ne_bytes());
    message.extend(0u32.to_ne_bytes());
    // struct ifinfomsg: family, padding, type, index, flags, change.
    message.extend([0u8, 0u8]);
    message.extend(0u16.to_ne_bytes());
    message.extend(1i32.to_ne_bytes());
    message.extend(IFF_UP.to_ne_bytes());
    message.extend(IFF_UP.to_ne_bytes());
    sendto(
        fd.as_raw_fd(),
        &message,
        &NetlinkAddr::new(0, 0),
        MsgFlags::empty(),
    )
    .map_err(fail("send"))?;
    let mut reply = [0u8; 256];
    let n = recv(fd.as_raw_fd(), &mut reply, MsgFlags::empty()).map_err(fail("receive"))?;
    // An NLMSG_ERROR (2) message whose error field (after the 16-byte header) is 0 is the ack.
    let kind = reply.get(4..6).map(|b| u16::from_ne_bytes([b[0], b[1]]));
    let error = reply
        .get(16..20)
        .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]));
    match (n >= 20, kind, error) {
        (true, Some(2), Some(0)) => Ok(()),
        (_, _, Some(code)) if code < 0 => Err(fail("the kernel's answer")(
            nix::errno::Errno::from_raw(-code),
        )),
        _ => Err(fail("the kernel's answer")(nix::errno::Errno::EPROTO)),
    }
}

/// Listens on `port` of this namespace's loopback (the second stage, in the box).
///
/// # Errors
/// The port cannot be bound.
pub fn listen(port: u16) -> Result<TcpListener, ContainError> {
    TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, port))).map_err(|source| {
        ContainError::Namespace {
            step: format!("listen for the proxy on the sandbox's 127.0.0.1:{port}"),
            source,
        }
    })
}

/// Takes the listening socket the stopped second stage `pid` holds (its only socket).
pub fn take(pid: u32) -> Option<TcpListener> {
    let target = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .ok()?
        .flatten()
        .find(|fd| {
            std::fs::read_link(fd.path())
                .is_ok_and(|link| link.to_string_lossy().starts_with("socket:"))
        })?
        .file_name()
        .to_str()?
        .parse::<i32>()
        .ok()?;
    let pid = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    let pidfd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()).ok()?;
    let fd =
        rustix::process::pidfd_getfd(&pidfd, target, rustix::process::PidfdGetfdFlags::empty())
            .ok()?;
    Some(TcpListener::from(fd))
}

/// Forwards every connection accepted on `listener` (the box's side) to the proxy on this
/// network's `127.0.0.1:port`, on threads of their own, for as long as this process lives.
pub fn forward(listener: TcpListener, port: u16) {
    let _ = std::thread::Builder::new()
        .name("aai-egress".into())
        .spawn(move || {
            for client in listener.incoming().flatten() {
                let _ = std::thread::Builder::new()
                    .name("aai-egress-conn".into())
                    .spawn(move || {
                        if let Ok(upstream) =
                            TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port)))
                        {
                            splice(client, upstream);
                        }
                    });
            }
        });
}

/// Copies both ways until each side has said all it will.
fn splice(client: TcpStream, upstream: TcpStream) {
    let (Ok(client_rx), Ok(upstream_tx)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let up = std::thread::spawn(move || copy(client_rx, upstream_tx));
    copy(upstream, client);
    let _ = up.join();
}

fn copy(mut from: TcpStream, mut to: TcpStream) {
    let mut buffer = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if to.write_all(&buffer[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
