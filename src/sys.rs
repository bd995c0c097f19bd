//! The process's few calls into the C library, and the only `unsafe` outside the codec:
//! the open-file limit (read, and raised to the hard limit at start as Go's runtime
//! does), glibc's `malloc_trim`, and a second handle on an upstream socket pingora
//! holds (for the drain to end a long-running request's upstream reads).

/// Raise the soft limit on open files to the hard limit and return the soft limit then
/// in force (`None` if it cannot be read).
pub fn raise_fd_limit() -> Option<u64> {
    let mut l = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes only the struct it is given, which lives on this stack.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) } != 0 {
        return None;
    }
    if l.rlim_cur < l.rlim_max {
        let raised = libc::rlimit {
            rlim_cur: l.rlim_max,
            rlim_max: l.rlim_max,
        };
        // SAFETY: setrlimit only reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
            l = raised;
        }
    }
    #[allow(clippy::unnecessary_cast)] // rlim_t is not u64 on every target
    Some(l.rlim_cur as u64)
}

/// Hand free pages in every malloc arena back to the operating system (glibc only;
/// elsewhere nothing).
pub fn malloc_trim() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks malloc's own free lists, under malloc's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A second handle (`dup`) on the TCP socket `fd`, which pingora passes to
/// `connected_to_upstream` for the upstream connection it holds. The socket stays open
/// while either handle does; shutting the copy down ends reads on pingora's too.
pub fn dup_socket(fd: std::os::fd::RawFd) -> std::io::Result<std::net::TcpStream> {
    // SAFETY: `fd` is the descriptor of the upstream connection pingora holds open for
    // the whole `connected_to_upstream` callback this is called from, so it stays open
    // for this borrow, which ends before the callback returns.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    Ok(std::net::TcpStream::from(borrowed.try_clone_to_owned()?))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_open_file_limit_is_read() {
        assert!(super::raise_fd_limit().is_some_and(|n| n > 0));
    }
}
