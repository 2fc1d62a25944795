//! A user reading a control file, and whether it may search a directory
//! ([`crate::layers::access`] decides what it is shown).

/// A user reading a control file: ids and supplementary groups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The reader's (file-system) uid.
    pub uid: u32,
    /// Its gid.
    pub gid: u32,
    /// Its supplementary groups (from `/proc/PID/status`; none when the process is gone).
    pub groups: Vec<u32>,
}

impl Caller {
    /// The caller of a request from thread `pid` as `uid`/`gid`.
    pub fn of(uid: u32, gid: u32, pid: u32) -> Caller {
        Caller {
            uid,
            gid,
            groups: crate::sys::process_groups(pid).unwrap_or_default(),
        }
    }

    /// Whether the caller is in group `g`.
    pub fn in_group(&self, g: u32) -> bool {
        self.gid == g || self.groups.contains(&g)
    }

    /// Whether the caller may search the directory `dir` (a path relative to `root`, without
    /// a leading `/`; empty for `root` itself) and every directory between `root` and it.
    ///
    /// A `privileged` daemon (root) asks the kernel, as the caller: this thread's supplementary
    /// groups, fs uid and fs gid become the caller's for one `faccessat2(X_OK, AT_EACCESS)` of
    /// `dir` from `root`, whose path resolution checks every directory on the way (modes and
    /// ACLs alike). Otherwise the daemon cannot act as another user: it reads each directory's
    /// mode (owner, group, other, as the kernel applies them) and, for a directory with an
    /// access ACL, which could deny a user the mode allows, allows only its owner. Any error
    /// means no.
    pub fn may_search(&self, root: std::os::fd::BorrowedFd, dir: &[u8], privileged: bool) -> bool {
        let dir: &[u8] = if dir.is_empty() { b"." } else { dir };
        if privileged {
            let Ok(_groups) = crate::sys::ThreadGroups::set(&self.groups) else {
                return false;
            };
            let _creds = crate::sys::FsCreds::switch(self.uid, self.gid);
            return crate::sys::access_at(root, dir, libc::X_OK).is_ok();
        }
        if !self.may_search_one(root, b".") {
            return false;
        }
        if dir == b"." {
            return true;
        }
        let mut prefix = Vec::with_capacity(dir.len());
        for part in dir.split(|&b| b == b'/') {
            if !prefix.is_empty() {
                prefix.push(b'/');
            }
            prefix.extend_from_slice(part);
            if !self.may_search_one(root, &prefix) {
                return false;
            }
        }
        true
    }

    /// Whether the mode (and ACL) of the directory `path` under `root` lets the caller
    /// search it.
    fn may_search_one(&self, root: std::os::fd::BorrowedFd, path: &[u8]) -> bool {
        let Ok(st) = crate::sys::stat_path_at(root, path) else {
            return false;
        };
        if st.mode & libc::S_IFMT != libc::S_IFDIR {
            return false;
        }
        let owner = self.uid == st.uid;
        if has_acl(root, path) {
            return owner && st.mode & 0o100 != 0;
        }
        let bit = if owner {
            0o100
        } else if self.in_group(st.gid) {
            0o010
        } else {
            0o001
        };
        st.mode & bit != 0
    }
}

/// Whether the object at `path` under `root` has an access ACL (or might: any error but
/// "no such attribute" counts as one).
fn has_acl(root: std::os::fd::BorrowedFd, path: &[u8]) -> bool {
    let attr = std::ffi::OsStr::new("system.posix_acl_access");
    match crate::sys::getxattr_path_at(root, path, attr, &mut []) {
        Ok(n) => n > 0,
        Err(e) => !matches!(e.raw_os_error(), Some(libc::ENODATA | libc::EOPNOTSUPP)),
    }
}
