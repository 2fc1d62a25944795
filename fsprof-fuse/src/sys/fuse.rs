//! The FUSE device: the session's `/dev/fuse` descriptor as file systems may need it (kernel
//! passthrough registers backing files on it; the io_uring transport registers its queues on
//! it; file systems tell the kernel through it that attributes it holds are stale), and the
//! backing-file ioctls.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, OwnedFd};
use std::sync::{Arc, OnceLock};

use super::cvt;

/// The ioctl group of `/dev/fuse` (`FUSE_DEV_IOC_MAGIC`).
const IOC_MAGIC: u64 = 229;

/// `_IOW(type, nr, size)`.
const fn iow(nr: u64, size: u64) -> u64 {
    (1 << 30) | (size << 16) | (IOC_MAGIC << 8) | nr
}

/// `struct fuse_backing_map`.
#[repr(C)]
struct BackingMap {
    fd: i32,
    flags: u32,
    padding: u64,
}

/// `FUSE_DEV_IOC_BACKING_OPEN`.
const BACKING_OPEN: u64 = iow(1, std::mem::size_of::<BackingMap>() as u64);
/// `FUSE_DEV_IOC_BACKING_CLOSE`.
const BACKING_CLOSE: u64 = iow(2, std::mem::size_of::<u32>() as u64);

/// The session's `/dev/fuse` descriptor, shared by whoever needs it; set once the session is
/// mounted (before the first request is served).
#[derive(Debug, Clone, Default)]
pub struct Device(Arc<OnceLock<OwnedFd>>);

impl Device {
    /// A device not known yet.
    pub fn new() -> Device {
        Device::default()
    }

    /// Sets the device (a duplicate of the session's descriptor); later calls are ignored.
    pub fn set(&self, fd: OwnedFd) {
        let _ = self.0.set(fd);
    }

    /// The descriptor, once set.
    pub fn get(&self) -> io::Result<BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.0
            .get()
            .map(|f| f.as_fd())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ENODEV))
    }

    /// Tells the kernel that the attributes it holds of node `nodeid` are stale
    /// (`FUSE_NOTIFY_INVAL_INODE` with a negative offset: the attributes only, the page cache
    /// stays), so that its next `stat` asks again. One `write(2)`; `ENOENT` when the kernel
    /// holds no such node (nothing to do), `ENODEV` before the mount or after its end.
    pub fn invalidate_attributes(&self, nodeid: u64) -> io::Result<()> {
        let dev = self.get()?;
        let msg = inval_inode(nodeid);
        // SAFETY: a valid buffer of the stated length for the duration of the call; the
        // kernel only reads it.
        let n = unsafe { libc::write(dev.as_raw_fd(), msg.as_ptr().cast(), msg.len()) };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

/// `FUSE_NOTIFY_INVAL_INODE`, the notification code a `struct fuse_out_header` carries in its
/// `error` field (`unique` 0).
const NOTIFY_INVAL_INODE: i32 = 2;

/// The bytes of a `FUSE_NOTIFY_INVAL_INODE` of `nodeid`'s attributes: `struct fuse_out_header`
/// (`len`, `error`, `unique`), then `struct fuse_notify_inval_inode_out` (`ino`, `off`, `len`),
/// with offset -1 (no page is invalidated).
fn inval_inode(nodeid: u64) -> [u8; 40] {
    let mut b = [0u8; 40];
    b[0..4].copy_from_slice(&40u32.to_ne_bytes());
    b[4..8].copy_from_slice(&NOTIFY_INVAL_INODE.to_ne_bytes());
    // unique (8..16) stays 0: a notification.
    b[16..24].copy_from_slice(&nodeid.to_ne_bytes());
    b[24..32].copy_from_slice(&(-1i64).to_ne_bytes());
    // len (32..40) stays 0.
    b
}

/// A file registered with the kernel as a kernel-passthrough backing file; closed (unregistered)
/// on drop.
#[derive(Debug)]
pub struct BackingId {
    id: u32,
    device: Device,
}

impl BackingId {
    /// Registers the open file `fd` as a backing file on `device`
    /// (`FUSE_DEV_IOC_BACKING_OPEN`; needs `CAP_SYS_ADMIN` and a session with passthrough).
    pub fn register(device: &Device, fd: BorrowedFd) -> io::Result<BackingId> {
        let dev = device.get()?;
        let map = BackingMap {
            fd: fd.as_raw_fd(),
            flags: 0,
            padding: 0,
        };
        // SAFETY: a valid pointer to a `fuse_backing_map` for the duration of the call; the
        // ioctl only reads it.
        let id = cvt(unsafe { libc::ioctl(dev.as_raw_fd(), BACKING_OPEN as _, &map) })?;
        Ok(BackingId {
            id: id as u32,
            device: device.clone(),
        })
    }

    /// The id the kernel knows it by (in the open reply).
    pub fn id(&self) -> u32 {
        self.id
    }
}

impl Drop for BackingId {
    fn drop(&mut self) {
        if let Ok(dev) = self.device.get() {
            // SAFETY: a valid pointer to the id for the duration of the call.
            let r = unsafe { libc::ioctl(dev.as_raw_fd(), BACKING_CLOSE as _, &self.id) };
            if r < 0 {
                log::warn!(
                    "cannot close backing file {}: {}",
                    self.id,
                    io::Error::last_os_error()
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ioctl_numbers_are_the_kernels() {
        // From fuse_kernel.h: _IOW(229, 1, struct fuse_backing_map), _IOW(229, 2, uint32_t).
        assert_eq!(BACKING_OPEN, 0x4010_e501);
        assert_eq!(BACKING_CLOSE, 0x4004_e502);
    }

    #[test]
    fn an_unset_device_is_enodev() {
        let d = Device::new();
        assert_eq!(d.get().unwrap_err().raw_os_error(), Some(libc::ENODEV));
        let e = d.invalidate_attributes(5).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV));
    }

    #[test]
    fn an_attribute_invalidation_is_laid_out_as_the_kernel_reads_it() {
        let b = inval_inode(0x0102_0304_0506_0708);
        let word = |at: usize| u64::from_ne_bytes(b[at..at + 8].try_into().unwrap());
        assert_eq!(u32::from_ne_bytes(b[0..4].try_into().unwrap()), 40);
        assert_eq!(i32::from_ne_bytes(b[4..8].try_into().unwrap()), 2);
        assert_eq!(word(8), 0, "unique 0: a notification");
        assert_eq!(word(16), 0x0102_0304_0506_0708);
        assert_eq!(word(24) as i64, -1, "attributes only");
        assert_eq!(word(32), 0);
    }
}
