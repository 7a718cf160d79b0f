//! Open descriptors: the connection limit only protects the service if the process may open that many
//! sockets, plus its database connections and files. At start, the soft limit is raised towards the hard
//! one as far as needed (as the Go runtime does at every start); if even the hard limit is too low, the
//! service says so and which flag to lower.

/// Descriptors the service needs besides its HTTP connections: the listener, the log, the database
/// (the SQLite file and its WAL, or the pool and the listening connection), the runtime's own.
pub const BESIDES_CONNECTIONS: u64 = 64;

/// Make room for `needed` descriptors; the limit in force afterwards, or why it could not be read.
#[cfg(unix)]
#[allow(clippy::unnecessary_cast)] // `rlim_t` is u64 on Linux, not on every Unix
pub fn make_room(needed: u64) -> Result<u64, String> {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes into the struct it is given, which lives for the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
        return Err(std::io::Error::last_os_error().to_string());
    }
    if limit.rlim_cur >= needed as libc::rlim_t {
        return Ok(limit.rlim_cur as u64);
    }
    let raised = libc::rlimit {
        rlim_cur: (needed as libc::rlim_t).min(limit.rlim_max),
        rlim_max: limit.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given, which lives for the call.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } != 0 {
        return Ok(limit.rlim_cur as u64);
    }
    Ok(raised.rlim_cur as u64)
}

#[cfg(not(unix))]
pub fn make_room(needed: u64) -> Result<u64, String> {
    Ok(needed)
}
