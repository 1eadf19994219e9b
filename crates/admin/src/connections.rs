//! The admin API's connection slots. At most `max` connections are open;
//! when all are taken, a new one takes the place of the oldest connection
//! that is not in a call (still sending its request head, or idle between
//! calls), which is closed. So idle or half-sent connections, however many
//! and however often reopened, cannot lock the operator out: the operator's
//! connection sends its request at once and is in a call before 63 newer
//! ones could push it out. A connection with bytes waiting unread in its
//! socket is not idle either: it has spoken, the core has not read it yet
//! (new connections are accepted faster than their first reads run). Only
//! when every slot is in a call or has unread bytes is a new connection
//! refused (a 503).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::os::fd::RawFd;
use std::rc::Rc;
use tokio_util::sync::CancellationToken;

pub struct Slots {
    max: usize,
    next_id: Cell<u64>,
    /// Oldest first.
    open: RefCell<VecDeque<Rc<Slot>>>,
}

pub struct Slot {
    id: u64,
    in_call: Cell<bool>,
    /// The connection's socket, to see whether it sent bytes not read yet.
    fd: Option<RawFd>,
    /// Cancelled when the slot is given to a newer connection.
    pub closed: CancellationToken,
}

/// What `admit` did.
pub enum Admission {
    /// A free slot.
    Free(Rc<Slot>),
    /// The slot of an idle connection, now being closed.
    MadeRoom(Rc<Slot>),
    /// Every open connection is in a call.
    Full,
}

impl Slots {
    pub fn new(max: usize) -> Rc<Slots> {
        Rc::new(Slots { max, next_id: Cell::new(0), open: RefCell::new(VecDeque::with_capacity(max)) })
    }

    /// A slot for a newly accepted connection (its socket `fd`). O(max):
    /// `max` is small.
    pub fn admit(&self, fd: Option<RawFd>) -> Admission {
        let mut open = self.open.borrow_mut();
        let mut made_room = false;
        if open.len() >= self.max {
            let idle = |s: &Rc<Slot>| !s.in_call.get() && s.fd.is_none_or(|fd| cumulo_sys::bytes_waiting(fd) == 0);
            let Some(idle) = open.iter().position(idle) else { return Admission::Full };
            let evicted = open.remove(idle).expect("position is in range");
            evicted.closed.cancel();
            made_room = true;
        }
        let id = self.next_id.get();
        self.next_id.set(id + 1);
        let slot = Rc::new(Slot { id, in_call: Cell::new(false), fd, closed: CancellationToken::new() });
        open.push_back(slot.clone());
        if made_room {
            Admission::MadeRoom(slot)
        } else {
            Admission::Free(slot)
        }
    }

    /// The connection ended (or was closed to make room).
    pub fn release(&self, slot: &Slot) {
        self.open.borrow_mut().retain(|s| s.id != slot.id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.open.borrow().len()
    }
}

impl Slot {
    /// Marks the connection as in a call until the guard is dropped (the
    /// answer is ready, or the call was abandoned).
    pub fn call(self: &Rc<Slot>) -> InCall {
        self.in_call.set(true);
        InCall(self.clone())
    }
}

pub struct InCall(Rc<Slot>);

impl Drop for InCall {
    fn drop(&mut self) {
        self.0.in_call.set(false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(a: Admission) -> Rc<Slot> {
        match a {
            Admission::Free(s) | Admission::MadeRoom(s) => s,
            Admission::Full => panic!("refused"),
        }
    }

    #[test]
    fn the_oldest_idle_connection_makes_room_and_calls_are_kept() {
        let slots = Slots::new(3);
        let a = slot(slots.admit(None));
        let b = slot(slots.admit(None));
        let c = slot(slots.admit(None));
        let _busy = a.call();
        // full: b (the oldest not in a call) is closed, not a
        let d = match slots.admit(None) {
            Admission::MadeRoom(d) => d,
            _ => panic!("expected to make room"),
        };
        assert!(b.closed.is_cancelled() && !a.closed.is_cancelled() && !c.closed.is_cancelled());
        assert_eq!(slots.len(), 3);
        // a closed connection's release after its eviction changes nothing
        slots.release(&b);
        assert_eq!(slots.len(), 3);
        let _c_busy = c.call();
        let _d_busy = d.call();
        assert!(matches!(slots.admit(None), Admission::Full), "every slot is in a call");
        drop(_d_busy);
        assert!(matches!(slots.admit(None), Admission::MadeRoom(_)));
        assert!(d.closed.is_cancelled());
        slots.release(&a);
        assert_eq!(slots.len(), 2);
        assert!(matches!(slots.admit(None), Admission::Free(_)));
    }

    #[test]
    fn a_connection_with_unread_bytes_is_not_idle() {
        use std::io::Write;
        use std::os::fd::AsRawFd;
        let slots = Slots::new(2);
        let (mut spoke, spoke_server) = std::os::unix::net::UnixStream::pair().unwrap();
        let (_silent, silent_server) = std::os::unix::net::UnixStream::pair().unwrap();
        spoke.write_all(b"GET /v1/status HTTP/1.1\r\n\r\n").unwrap();
        let a = slot(slots.admit(Some(spoke_server.as_raw_fd())));
        let b = slot(slots.admit(Some(silent_server.as_raw_fd())));
        // full: the older one has sent a request not read yet, so the
        // silent one makes room
        assert!(matches!(slots.admit(None), Admission::MadeRoom(_)));
        assert!(b.closed.is_cancelled() && !a.closed.is_cancelled());
    }
}
