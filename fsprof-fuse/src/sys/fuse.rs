//! The FUSE device: the session's `/dev/fuse` descriptor as file systems may need it (kernel
//! passthrough registers backing files on it; the io_uring transport registers its queues on
//! it), and the backing-file ioctls.

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
    }
}
