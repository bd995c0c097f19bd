//! The process's few calls into the C library:
//! the open-file limit (read, and raised to the hard limit at start as Go's runtime
//! does) and the allocator's purge (jemalloc's, or glibc's `malloc_trim`). (The one other `unsafe` outside the codec, a second
//! handle on an upstream socket, is `limits::admission::dup_socket`.)

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

/// Hand free pages in every malloc arena back to the operating system: jemalloc's
/// purge of all arenas when it is the allocator (`arena.<MALLCTL_ARENAS_ALL>.purge`),
/// glibc's `malloc_trim` otherwise; elsewhere nothing.
pub fn malloc_trim() {
    #[cfg(feature = "jemalloc")]
    // SAFETY: a documented mallctl name with no old or new value: jemalloc purges
    // unused dirty pages of every arena, under its own locks.
    unsafe {
        tikv_jemalloc_sys::mallctl(
            c"arena.4096.purge".as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        );
    }
    #[cfg(all(not(feature = "jemalloc"), target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks malloc's own free lists, under malloc's own locks.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_open_file_limit_is_read() {
        assert!(super::raise_fd_limit().is_some_and(|n| n > 0));
    }
}
