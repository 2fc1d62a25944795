//! Transports: how requests reach the file system from the kernel and replies go back.
//!
//! * [`classic`]: fuser 0.18 over `/dev/fuse` (the default; every kernel).
//! * `uring`: FUSE over io_uring (Linux 6.14+, `enable_uring`), beside `/dev/fuse`, which keeps
//!   carrying what the kernel sends there (forgets, interrupts, requests before the rings are
//!   ready).
//!
//! Both decode requests into [`crate::filesystem::Request`]s and typed arguments, lend handles
//! and buffers, call the same [`FileSystem`], and build replies with one errno conversion.

pub mod classic;

use std::io;
use std::os::fd::AsFd;
use std::path::Path;
use std::sync::Arc;

use fuser::Session;

use crate::filesystem::FileSystem;
use crate::mount::{MountSettings, fuser_config};
use crate::sys::fuse::Device;

use classic::Classic;

/// Which transport serves a mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transport {
    /// fuser over `/dev/fuse`.
    #[default]
    Classic,
    /// FUSE over io_uring, with `/dev/fuse` served beside it.
    Uring,
}

impl Transport {
    /// The name recorded in profiles (`transport=...`).
    pub fn name(self) -> &'static str {
        match self {
            Transport::Classic => "classic",
            Transport::Uring => "uring",
        }
    }
}

/// A mounted session, not yet serving.
pub struct Mounted<F: FileSystem + 'static> {
    session: Session<Classic<F>>,
}

impl<F: FileSystem + 'static> Mounted<F> {
    /// Mounts `fs` at `settings.mnt` (the kernel's `INIT` is answered here) and makes the
    /// session's `/dev/fuse` known to `device`.
    pub fn mount(fs: Arc<F>, settings: &MountSettings, device: &Device) -> io::Result<Mounted<F>> {
        if settings.transport == Transport::Uring {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "the io_uring transport is not available in this build",
            ));
        }
        let session = Session::new(Classic::new(fs), &settings.mnt, &fuser_config(settings))?;
        device.set(session.as_fd().try_clone_to_owned()?);
        Ok(Mounted { session })
    }

    /// Something that unmounts the session from another thread.
    pub fn unmounter(&mut self) -> fuser::SessionUnmounter {
        self.session.unmount_callable()
    }

    /// Serves requests until the file system is unmounted.
    pub fn run(self) -> io::Result<()> {
        self.session.run()
    }

    /// Serves requests in background threads.
    pub fn spawn(self) -> io::Result<fuser::BackgroundSession> {
        self.session.spawn()
    }
}

/// The mount point of a settings value (for messages).
pub fn mount_point(settings: &MountSettings) -> &Path {
    &settings.mnt
}
