//! The TCP sockets this process holds, read through `/proc/self/fd` (Linux): what an in-process server did to the
//! sockets it accepted can be checked from the outside, with no hook in the server.

use std::net::SocketAddr;
use std::os::fd::{BorrowedFd, RawFd};

/// One TCP socket of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpSocket {
    pub fd: RawFd,
    pub local: SocketAddr,
    /// `None` for a listener.
    pub peer: Option<SocketAddr>,
    /// Whether `TCP_NODELAY` is set.
    pub nodelay: bool,
}

/// Every IPv4 or IPv6 TCP socket this process has open now.
///
/// Call it while the connections to look at are held open: a descriptor closed by another thread during the scan
/// is skipped (its calls fail with `EBADF`), and one reused in between would be read as the new socket.
pub fn tcp_sockets() -> Vec<TcpSocket> {
    let mut sockets = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc/self/fd") else { return sockets };
    for entry in entries.flatten() {
        let Some(fd) = entry.file_name().to_str().and_then(|n| n.parse::<RawFd>().ok()) else { continue };
        let is_socket = std::fs::read_link(entry.path()).is_ok_and(|t| t.to_string_lossy().starts_with("socket:"));
        if !is_socket {
            continue;
        }
        // SAFETY: `fd` was open when listed, and the borrow ends before this iteration does; socket2 only issues
        // getsockname/getpeername/getsockopt on it, which fail harmlessly (EBADF) if another thread closed it.
        let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
        let socket = socket2::SockRef::from(&borrowed);
        let is_tcp = socket.r#type().is_ok_and(|t| t == socket2::Type::STREAM);
        let Some(local) = socket.local_addr().ok().and_then(|a| a.as_socket()) else { continue };
        if !is_tcp {
            continue;
        }
        let peer = socket.peer_addr().ok().and_then(|a| a.as_socket());
        let Ok(nodelay) = socket.tcp_nodelay() else { continue };
        sockets.push(TcpSocket { fd, local, peer, nodelay });
    }
    sockets
}
