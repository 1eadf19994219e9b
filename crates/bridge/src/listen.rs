//! The bridges' sockets. Every instance of a bridge (count_process x
//! count_thread of them, on whichever shard runs it) binds the same address
//! with SO_REUSEPORT, and the kernel spreads new connections (tcp) and
//! senders (udp, by the hash of their address, so one sender's datagrams
//! and answers stay on one socket) over them. Each instance thus owns its
//! socket outright: nothing is shared between instances or threads, no
//! instance waits on another, and one can stop or restart alone. The cost:
//! another program of the same user that sets SO_REUSEPORT could bind the
//! address too; a program that does not is refused as usual (docs/BRIDGES.md).

use socket2::{Domain, Socket, Type};
use std::net::SocketAddr;

/// Connections the kernel queues for one instance before it accepts them.
const LISTEN_BACKLOG: i32 = 1024;

pub fn tcp(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = shared(addr, Type::STREAM)?;
    socket.listen(LISTEN_BACKLOG)?;
    tokio::net::TcpListener::from_std(socket.into())
}

pub fn udp(addr: SocketAddr) -> std::io::Result<tokio::net::UdpSocket> {
    tokio::net::UdpSocket::from_std(shared(addr, Type::DGRAM)?.into())
}

fn shared(addr: SocketAddr, kind: Type) -> std::io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), kind, None)?;
    // A restarted core binds again while old connections sit in TIME_WAIT.
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.set_nonblocking(true)?;
    Ok(socket)
}
