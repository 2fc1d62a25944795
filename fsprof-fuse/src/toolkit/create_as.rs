//! Creating objects with the caller's rights, shared by the passthrough and RAIF.

use std::io;

use crate::filesystem::Request;
use crate::sys::{self, FsCreds};

/// Runs `create` (which makes a new object) as the calling user, so the object belongs to them
/// and the lower file system checks their rights, as locally.
///
/// The worker thread has its own file-system context, whose umask is set to the caller's
/// ([`Request::umask`])
/// (`umask(2)` runs only when that differs from the last one set on this thread). With
/// `FUSE_DONT_MASK` the kernel passes it unapplied, so the lower file system applies it only
/// where no default ACL says otherwise; without it the mode is already masked and masking again
/// changes nothing. When the daemon is `privileged` (root), the thread's fs uid and gid become
/// the caller's; if the lower file system then refuses, the caller's right may come from a
/// supplementary group, which the switch does not carry: the call is retried with the caller's
/// supplementary groups set on this thread too. Nothing is created as root on a caller's
/// behalf, and no process-wide state changes.
pub fn create_as<T>(
    privileged: bool,
    req: &Request,
    mut create: impl FnMut() -> io::Result<T>,
) -> io::Result<T> {
    sys::set_thread_umask(req.umask & 0o777)?;
    if !privileged || (req.uid == 0 && req.gid == 0) {
        return create();
    }
    let first = {
        let _creds = FsCreds::switch(req.uid, req.gid);
        create()
    };
    match first {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            let Ok(groups) = sys::process_groups(req.pid) else {
                return Err(e);
            };
            let _groups = sys::ThreadGroups::set(&groups)?;
            let _creds = FsCreds::switch(req.uid, req.gid);
            create()
        }
        r => r,
    }
}

/// Whether the caller of `req` is in group `gid`: its fs gid, or one of its supplementary
/// groups (read from `/proc/PID/status`, so only asked where it matters). A request the kernel
/// makes on its own (pid 0) or whose process is gone counts as outside.
pub fn in_group(req: &Request, gid: u32) -> bool {
    req.gid == gid || (req.pid != 0 && sys::process_groups(req.pid).is_ok_and(|g| g.contains(&gid)))
}
