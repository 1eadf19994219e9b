//! The few operating-system calls the standard library and tokio do not
//! offer. The only module of the workspace allowed `unsafe`.
#![allow(
    unsafe_code,
    reason = "the one module of the workspace that calls the OS directly; a SAFETY comment on every block"
)]

use tokio::process::Command;

/// Makes a child die with the core (PR_SET_PDEATHSIG): if the core is killed
/// with SIGKILL, its services do not linger as orphans.
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: prctl is async-signal-safe and touches only the child.
    unsafe {
        cmd.pre_exec(|| {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            Ok(())
        });
    }
}

/// Hands `fds` to the child as descriptors 3, 4, ... in order (CloudI's
/// convention: thread i's socket is descriptor 3 + i). The caller keeps the
/// `OwnedFd`s open until the child is spawned, then drops them.
pub fn pass_fds(cmd: &mut Command, fds: &[std::os::fd::OwnedFd]) {
    use std::os::fd::AsRawFd;
    let raw: Vec<i32> = fds.iter().map(|f| f.as_raw_fd()).collect();
    let first_free = 3 + raw.len() as i32;
    // SAFETY: only fcntl and dup2, both async-signal-safe, on descriptors the
    // parent holds open across the spawn; nothing is allocated in the child.
    unsafe {
        cmd.pre_exec(move || {
            // First move every source above the targets, so that placing
            // one cannot overwrite another not yet placed.
            let mut moved = [0i32; 1024];
            for (i, fd) in raw.iter().enumerate().take(moved.len()) {
                let m = libc::fcntl(*fd, libc::F_DUPFD_CLOEXEC, first_free);
                if m < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                moved[i] = m;
            }
            for (i, m) in moved.iter().take(raw.len()).enumerate() {
                // dup2 clears close-on-exec on the target.
                if libc::dup2(*m, 3 + i as i32) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Signals a process's whole group (services run as group leaders, so
/// wrappers and their children get the signal too).
pub fn signal(pid: u32, sig: i32) {
    // SAFETY: kill(2) with a plain pid and signal number.
    unsafe {
        libc::kill(-(pid as i32), sig);
    }
}

/// Fills `buf` from the kernel's random source.
pub fn random_bytes(buf: &mut [u8]) {
    use std::io::Read;
    if let Ok(mut f) = std::fs::File::open("/dev/urandom") {
        if f.read_exact(buf).is_ok() {
            return;
        }
    }
    for b in buf.iter_mut() {
        *b = fastrand::u8(..);
    }
}

/// Clock ticks per second, the unit of CPU times in /proc.
pub fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let v = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if v > 0 {
        v as u64
    } else {
        100
    }
}

/// Bytes per memory page, the unit of /proc/self/statm.
pub fn page_size() -> u64 {
    // SAFETY: sysconf only reads a system constant.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as u64
    } else {
        4096
    }
}

/// Bytes received on a socket and not read yet (FIONREAD); 0 on error.
/// The keep-alive check uses it: what waits unread was sent, whether or
/// not the core has had the chance to read it.
pub fn bytes_waiting(fd: std::os::fd::RawFd) -> usize {
    let mut n: libc::c_int = 0;
    // SAFETY: FIONREAD writes one c_int through the pointer, which points
    // to a live local; an fd that is not a socket just makes it fail.
    let r = unsafe { libc::ioctl(fd, libc::FIONREAD, &mut n) };
    if r == 0 && n > 0 {
        n as usize
    } else {
        0
    }
}

/// Returns the heap's free memory to the system (glibc's `malloc_trim`):
/// glibc keeps freed memory for reuse, so after a peer's thousands of
/// subscriptions are gone the core's RSS would otherwise stay at its peak.
/// A no-op with other C libraries.
pub fn trim_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists; any
    // pad (0) is valid.
    unsafe {
        libc::malloc_trim(0);
    }
}
