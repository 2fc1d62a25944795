//! Transports: how requests reach the file system from the kernel and replies go back.
//!
//! * [`classic`]: fuser 0.18 over `/dev/fuse` (the default; every kernel).
//! * [`uring`]: FUSE over io_uring (Linux 6.14+, `enable_uring`), beside `/dev/fuse`, which keeps
//!   carrying what the kernel sends there (forgets, interrupts, requests before the rings are
//!   ready). Refused with one line where it cannot run; never a silent fallback.
//!
//! Both decode requests into [`crate::filesystem::Request`]s and typed arguments, lend handles
//! and buffers, call the same [`FileSystem`], and build replies with one errno conversion.

pub mod classic;
pub mod settings;
pub mod uring;

pub use settings::{MountSettings, Transport};

use std::io;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fuser::{Session, SessionACL};

use crate::filesystem::{Caps, FileSystem};
use crate::sys;
use crate::sys::fuse::Device;

use classic::Classic;
use uring::Rings;
use uring::dispatch::{Access, Dispatch};

/// How long the `/dev/fuse` thread of the io_uring transport waits after a forget before it
/// reads again (see [`Mounted::mount`]).
pub const FORGET_PAUSE: std::time::Duration = std::time::Duration::from_millis(1);

/// A mounted session, not yet serving.
pub struct Mounted<F: FileSystem + 'static> {
    session: Session<Classic<F>>,
    /// The io_uring transport's queues (already serving).
    rings: Option<Rings>,
    fs: Arc<F>,
    mnt: PathBuf,
}

impl<F: FileSystem + 'static> Mounted<F> {
    /// Mounts `fs` at `settings.mnt` (the kernel's `INIT` is answered here) and makes the
    /// session's `/dev/fuse` known to `device`. With the io_uring transport, first checks that
    /// it can run here and, once mounted, starts its queues; where it cannot run, nothing stays
    /// mounted and the error says why in one line.
    pub fn mount(fs: Arc<F>, settings: &MountSettings, device: &Device) -> io::Result<Mounted<F>> {
        let mut config = classic::config(settings);
        let mut classic = Classic::new(fs.clone()).with_negative_ttl(settings.cache.negative_ttl);
        let uring = settings.transport == Transport::Uring;
        if uring {
            uring::check()?;
            // The file system is destroyed once the rings have ended, not when fuser's session
            // does; `/dev/fuse` carries only forgets and interrupts, which one thread serves
            // (more only while a forget waits, say on an injected delay).
            classic = classic.with_caps(Caps::OVER_IO_URING).destroyed_by_caller();
            config.n_threads = Some(1);
            config.max_threads = Some(settings.max_threads.max(1));
            // Forgets, which no caller waits for, cost a wake-up each when read one by one;
            // pausing after one lets the kernel hand over those that come meanwhile in one
            // BATCH_FORGET (an interrupt then waits at most the pause).
            config.forget_pause = Some(FORGET_PAUSE);
        }
        let negotiated = classic.negotiated();
        let session = Session::new(classic, &settings.mnt, &config)?;
        device.set(session.as_fd().try_clone_to_owned()?);
        if !uring {
            return Ok(Mounted {
                session,
                rings: None,
                fs,
                mnt: settings.mnt.clone(),
            });
        }
        let init = negotiated.lock().clone();
        let refused = match &init {
            None => Some(io::Error::other("the kernel's INIT was not answered")),
            Some(init) => uring::not_offered(init),
        };
        if let Some(e) = refused {
            drop(session);
            return Err(e);
        }
        let init = init.expect("checked above");
        let access = match config.acl {
            SessionACL::All => Access::All,
            SessionACL::RootAndOwner => Access::RootAndOwner(sys::geteuid()),
            SessionACL::Owner => Access::Owner(sys::geteuid()),
        };
        let dispatch = Arc::new(
            Dispatch::new(fs.clone(), access).with_negative_ttl(settings.cache.negative_ttl),
        );
        let payload = uring::payload_size(&init, sys::uring::page_size());
        let (rings, started) = Rings::start(
            session.as_fd(),
            dispatch,
            payload,
            settings.max_threads,
            &settings.mnt,
        );
        if let Err(e) = started {
            // The kernel has moved the connection back to /dev/fuse (or never will serve it):
            // unmount rather than serve it classically. Aborting first frees any caller already
            // waiting for the rings.
            let _ = sys::force_unmount(&settings.mnt);
            drop(session);
            let _ = rings.join();
            return Err(e);
        }
        Ok(Mounted {
            session,
            rings: Some(rings),
            fs,
            mnt: settings.mnt.clone(),
        })
    }

    /// Something that unmounts the session from another thread.
    pub fn unmounter(&mut self) -> fuser::SessionUnmounter {
        self.session.unmount_callable()
    }

    /// Serves requests until the file system is unmounted; with the io_uring transport, also
    /// waits for its queues to end, then destroys the file system.
    pub fn run(self) -> io::Result<()> {
        let Mounted {
            session,
            rings,
            fs,
            mnt,
        } = self;
        let served = session.run();
        let Some(rings) = rings else {
            return served;
        };
        if served.is_err() {
            // /dev/fuse is no longer served: end the rings too rather than serve half a mount.
            let _ = sys::force_unmount(&mnt);
        }
        let rings = rings.join();
        fs.destroy();
        served.and(rings)
    }

    /// Serves requests in background threads.
    pub fn spawn(self) -> io::Result<Background> {
        let Mounted {
            session, rings, fs, ..
        } = self;
        let session = match session.spawn() {
            Ok(s) => s,
            Err(e) => {
                // The session is gone (unmounted): so are the rings' entries.
                if let Some(r) = rings {
                    let _ = r.join();
                }
                return Err(e);
            }
        };
        let rings = rings.map(|r| -> Box<dyn FnOnce() -> io::Result<()> + Send> {
            Box::new(move || {
                let r = r.join();
                fs.destroy();
                r
            })
        });
        Ok(Background { session, rings })
    }
}

/// A mount served by background threads ([`Mounted::spawn`]); unmounted when dropped.
pub struct Background {
    session: fuser::BackgroundSession,
    /// Waits for the io_uring transport's queues and destroys the file system.
    rings: Option<Box<dyn FnOnce() -> io::Result<()> + Send>>,
}

impl Background {
    /// Unmounts and waits for every serving thread.
    pub fn umount_and_join(self) -> io::Result<()> {
        self.session.umount_and_join()?;
        self.rings.map_or(Ok(()), |join| join())
    }
}

/// The mount point of a settings value (for messages).
pub fn mount_point(settings: &MountSettings) -> &Path {
    &settings.mnt
}
