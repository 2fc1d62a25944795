//! Filesystem session
//!
//! A session runs a filesystem implementation while it is being mounted to a specific mount
//! point. A session begins by mounting the filesystem and ends by unmounting it. While the
//! filesystem is mounted, the session loop receives, dispatches and replies to kernel requests
//! for filesystem operations under its mount point.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fs::File;
use std::io;
use std::os::fd::AsFd;
use std::os::fd::BorrowedFd;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::AtomicI32;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::Duration;
use std::thread::{self};

use log::debug;
use log::error;
use log::info;
use log::warn;
use nix::unistd::Uid;
use nix::unistd::geteuid;
use nix::poll::PollFd;
use nix::poll::PollFlags;
use nix::poll::PollTimeout;
use nix::poll::poll;
use parking_lot::Condvar;
use parking_lot::Mutex;

use crate::Errno;
use crate::Filesystem;
use crate::KernelConfig;
use crate::MountOption;
use crate::ReplyEmpty;
use crate::Request;
use crate::channel::Channel;
use crate::channel::ChannelSender;
use crate::ll::RequestId;
use crate::dev_fuse::DevFuse;
use crate::ll;
use crate::ll::Operation;
use crate::ll::ResponseErrno;
use crate::ll::Version;
use crate::ll::flags::init_flags::InitFlags;
use crate::ll::fuse_abi as abi;
use crate::mnt::Mount;
use crate::mnt::mount_options::Config;
use crate::mnt::mount_options::check_option_conflicts;
use crate::notify::Notifier;
use crate::read_buf::FuseReadBuf;
use crate::reply::Reply;
use crate::reply::ReplyRaw;
use crate::reply::ReplySender;
use crate::request::RequestWithSender;

/// The max size of write requests from the kernel. The absolute minimum is 4k,
/// FUSE recommends at least 128k, max 16M. The FUSE default is 16M on macOS
/// and 128k on other systems.
pub(crate) const MAX_WRITE_SIZE: usize = 16 * 1024 * 1024;

#[derive(Default, Debug, Eq, PartialEq, Clone, Copy)]
/// How requests should be filtered based on the calling UID.
pub enum SessionACL {
    /// Allow requests from any user. Corresponds to the `allow_other` mount option.
    All,
    /// Allow requests from root. Corresponds to the `allow_root` mount option.
    RootAndOwner,
    /// Allow requests from the owning UID. This is FUSE's default mode of operation.
    #[default]
    Owner,
}

impl SessionACL {
    /// Returns the mount option string for kernel/fusermount/libfuse paths.
    /// Both `All` and `RootAndOwner` map to `allow_other` - the kernel only
    /// understands `allow_other`, and fuser enforces the root-only restriction internally.
    #[allow(dead_code)]
    pub(crate) fn to_mount_option(self) -> Option<&'static str> {
        match self {
            SessionACL::All | SessionACL::RootAndOwner => Some("allow_other"),
            SessionACL::Owner => None,
        }
    }
}

/// Calls `destroy` on drop.
#[derive(Debug)]
pub(crate) struct FilesystemHolder<FS: Filesystem> {
    pub(crate) fs: Option<FS>,
}

impl<FS: Filesystem> FilesystemHolder<FS> {
    fn destroy(&mut self) {
        if let Some(mut fs) = self.fs.take() {
            fs.destroy();
        }
    }
}

impl<FS: Filesystem> Drop for FilesystemHolder<FS> {
    fn drop(&mut self) {
        self.destroy();
    }
}

#[derive(Debug)]
struct UmountOnDrop {
    mount: Arc<Mutex<Option<Mount>>>,
}

impl UmountOnDrop {
    fn umount(&self) -> io::Result<()> {
        if let Some(mount) = self.mount.lock().take() {
            mount.umount()?;
        }
        Ok(())
    }
}

impl Drop for UmountOnDrop {
    fn drop(&mut self) {
        if let Err(e) = self.umount() {
            warn!("Failed to umount filesystem: {}", e);
        }
    }
}

/// The session data structure
#[derive(Debug)]
pub struct Session<FS: Filesystem> {
    /// Filesystem operation implementations. None after `destroy` called.
    pub(crate) filesystem: FilesystemHolder<FS>,
    /// Communication channel to the kernel driver
    pub(crate) ch: Channel,
    /// Handle to the mount.  Dropping this unmounts.
    mount: UmountOnDrop,
    /// Whether to restrict access to owner, root + owner, or unrestricted
    /// Used to implement `allow_root` and `auto_unmount`
    pub(crate) allowed: SessionACL,
    /// User that launched the fuser process
    pub(crate) session_owner: Uid,
    /// FUSE protocol version, as reported by the kernel.
    /// The field is set to `Some` when the init message is received.
    pub(crate) proto_version: Option<Version>,
    pub(crate) config: Config,
}

impl<FS: Filesystem> AsFd for Session<FS> {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.ch.as_fd()
    }
}

impl<FS: Filesystem> Session<FS> {
    /// Create a new session by mounting the given filesystem to the given mountpoint
    /// # Errors
    /// Returns an error if the options are incorrect, or if the fuse device can't be mounted.
    pub fn new<P: AsRef<Path>>(
        filesystem: FS,
        mountpoint: P,
        options: &Config,
    ) -> io::Result<Session<FS>> {
        check_option_conflicts(options)?;

        let mountpoint = mountpoint.as_ref();
        info!("Mounting {}", mountpoint.display());
        // If AutoUnmount is requested, but not AllowRoot or AllowOther, return an error
        // because fusermount needs allow_root or allow_other to handle the auto_unmount option
        if options.mount_options.contains(&MountOption::AutoUnmount)
            && options.acl == SessionACL::Owner
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("auto_unmount requires acl != Owner, got: {:?}", options.acl),
            ));
        }
        let (file, mount) = Mount::new(mountpoint, &options.mount_options, options.acl)?;

        let ch = Channel::new(file);

        let mut session = Session {
            filesystem: FilesystemHolder {
                fs: Some(filesystem),
            },
            ch,
            mount: UmountOnDrop {
                mount: Arc::new(Mutex::new(Some(mount))),
            },
            allowed: options.acl,
            session_owner: geteuid(),
            proto_version: None,
            config: options.clone(),
        };

        session.handshake()?;

        Ok(session)
    }

    /// Wrap an existing /dev/fuse file descriptor. This doesn't mount the
    /// filesystem anywhere; that must be done separately.
    pub fn from_fd(
        filesystem: FS,
        fd: OwnedFd,
        acl: SessionACL,
        config: Config,
    ) -> io::Result<Self> {
        let ch = Channel::new(Arc::new(DevFuse(File::from(fd))));
        let mut session = Session {
            filesystem: FilesystemHolder {
                fs: Some(filesystem),
            },
            ch,
            mount: UmountOnDrop {
                mount: Arc::new(Mutex::new(None)),
            },
            allowed: acl,
            session_owner: geteuid(),
            proto_version: None,
            config,
        };

        session.handshake()?;

        Ok(session)
    }

    /// Run the session loop in a background thread. If the returned handle is dropped,
    /// the filesystem is unmounted and the given session ends.
    pub fn spawn(self) -> io::Result<BackgroundSession> {
        let sender = self.ch.sender();
        // Take the fuse_session, so that we can unmount it
        let mount = std::mem::take(&mut *self.mount.mount.lock());
        let guard = thread::Builder::new()
            .name("fuser-bg".to_string())
            .spawn(move || self.run())?;
        Ok(BackgroundSession {
            guard,
            sender,
            mount,
        })
    }

    /// Run the session loop that receives kernel requests and dispatches them to method
    /// calls into the filesystem. This read-dispatch-loop is non-concurrent to prevent
    /// having multiple buffers (which take up much memory), but the filesystem methods
    /// may run concurrent by spawning threads.
    /// # Errors
    /// Returns any final error when the session comes to an end.
    pub fn run(self) -> io::Result<()> {
        let Session {
            filesystem,
            ch,
            mount: _do_not_umount_yet,
            allowed,
            session_owner,
            proto_version: _,
            config,
        } = self;

        let n_threads = config.n_threads.unwrap_or(1);
        let max_threads = config.max_threads.unwrap_or(n_threads).max(n_threads);

        if !cfg!(target_os = "linux") && max_threads != 1 {
            // TODO: check whether it works on macOS/FreeBSD and enable if it works.
            return Err(io::Error::other(
                "n_threads != 1 is only supported on Linux",
            ));
        }

        let Some(n_threads_minus_one) = n_threads.checked_sub(1) else {
            return Err(io::Error::other("n_threads"));
        };

        let mut filesystem = Arc::new(filesystem);

        let mut channels = Vec::with_capacity(n_threads);

        for _ in 0..n_threads_minus_one {
            channels.push(next_channel(&ch, config.clone_fd)?);
        }
        channels.push(ch.clone());

        // fsprof patch: the workers share a pool that grows while they are all busy.
        let pool = Arc::new(Pool {
            max: max_threads,
            clone_fd: config.clone_fd,
            ch: ch.clone(),
            idle: AtomicUsize::new(n_threads),
            total: AtomicUsize::new(n_threads),
            requests: (0..max_threads).map(|_| Requests::default()).collect(),
            threads: Mutex::new(Vec::with_capacity(max_threads)),
            ended: AtomicBool::new(false),
            forget_pause: config.forget_pause,
            watch: Mutex::new(()),
            watched: Condvar::new(),
            held: Mutex::new(VecDeque::new()),
        });

        // Starts workers and sees the connection end while none reads (see `Pool`).
        let watcher = SessionEventLoop {
            thread_name: "fuse-watch".to_string(),
            filesystem: filesystem.clone(),
            ch,
            allowed,
            session_owner,
            pool: pool.clone(),
            slot: usize::MAX,
        };
        let watcher = thread::Builder::new()
            .name(watcher.thread_name.clone())
            .spawn(move || watcher.watch())?;

        for (i, ch) in channels.into_iter().enumerate() {
            let thread_name = format!("fuser-{i}");
            let event_loop = SessionEventLoop {
                thread_name: thread_name.clone(),
                filesystem: filesystem.clone(),
                ch,
                allowed,
                session_owner,
                pool: pool.clone(),
                slot: i,
            };
            let thread = thread::Builder::new()
                .name(thread_name)
                .spawn(move || event_loop.event_loop())?;
            pool.threads.lock().push(thread);
        }

        // The watcher may start one more worker until it has ended, so the workers are joined
        // again after it.
        let mut reply = pool.join_workers();
        pool.ended.store(true, Ordering::Release);
        pool.wake_watcher();
        if watcher.join().is_err() {
            return Err(io::Error::other("the session's watcher panicked"));
        }
        if let Err(e) = pool.join_workers() {
            reply = reply.and(Err(e));
        }
        drop(pool);

        let Some(filesystem) = Arc::get_mut(&mut filesystem) else {
            return Err(io::Error::other(
                "BUG: must have one refcount for filesystem",
            ));
        };

        filesystem.destroy();

        reply
    }

    fn handshake(&mut self) -> io::Result<()> {
        let mut buf = FuseReadBuf::new();
        let buf = buf.as_mut();

        loop {
            // Read the init request from the kernel
            let size = match self.ch.receive_retrying(buf) {
                Ok(size) => size,
                Err(nix::errno::Errno::ENODEV) => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotConnected,
                        "FUSE device disconnected during handshake",
                    ));
                }
                Err(err) => return Err(err.into()),
            };

            // Parse the request
            let request = match ll::AnyRequest::try_from(&buf[..size]) {
                Ok(request) => request,
                Err(err) => {
                    error!("{err}");
                    return Err(io::Error::new(io::ErrorKind::InvalidData, err.to_string()));
                }
            };

            // Extract the init operation
            let op = match request.operation() {
                Ok(op) => op,
                Err(_) => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "Failed to parse FUSE operation",
                    ));
                }
            };

            let init = match op {
                ll::Operation::Init(init) => init,
                _ => {
                    error!("Received non-init FUSE operation before init: {}", request);
                    // Send error response and return error - non-init during handshake is invalid
                    <ReplyRaw as Reply>::new(
                        request.unique(),
                        ReplySender::Channel(self.ch.sender()),
                    )
                    .send_ll(&ResponseErrno(ll::Errno::EIO));
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        "Received non-init FUSE operation during handshake",
                    ));
                }
            };

            let v = init.version();
            if v.0 > abi::FUSE_KERNEL_VERSION {
                // Kernel has a newer major version than we support.
                // Send our version and wait for a second INIT request with a compatible version.
                debug!(
                    "INIT: Kernel version {} > our version {}, sending our version and waiting for next init",
                    v.0,
                    abi::FUSE_KERNEL_VERSION
                );
                let response = init.reply_version_only();
                <ReplyRaw as Reply>::new(request.unique(), ReplySender::Channel(self.ch.sender()))
                    .send_ll(&response);
                continue;
            }

            // We don't support ABI versions before 7.6
            if v < Version(7, 6) {
                error!("Unsupported FUSE ABI version {v}");
                <ReplyRaw as Reply>::new(request.unique(), ReplySender::Channel(self.ch.sender()))
                    .send_ll(&ResponseErrno(ll::Errno::EPROTO));
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!("Unsupported FUSE ABI version {v}"),
                ));
            }

            let mut config = KernelConfig::new(init.capabilities(), init.max_readahead(), v);

            // Call filesystem init method and give it a chance to return an error
            let Some(filesystem) = &mut self.filesystem.fs else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "Bug: filesystem must be initialized during handshake",
                ));
            };
            let res = filesystem.init(Request::ref_cast(request.header()), &mut config);
            if let Err(error) = res {
                let errno = Errno::from_i32(error.raw_os_error().unwrap_or(0));
                <ReplyRaw as Reply>::new(request.unique(), ReplySender::Channel(self.ch.sender()))
                    .send_ll(&ResponseErrno(errno));
                return Err(error);
            }

            // Remember the ABI version supported by kernel and mark the session initialized.
            self.proto_version = Some(v);

            // Log capability status for debugging
            for bit in 0..64 {
                let bitflags = InitFlags::from_bits_retain(1 << bit);
                if bitflags == InitFlags::FUSE_INIT_EXT {
                    continue;
                }
                let bitflag_is_known = InitFlags::all().contains(bitflags);
                let kernel_supports = init.capabilities().contains(bitflags);
                let we_requested = config.requested.contains(bitflags);
                // On macOS, there's a clash between linux and macOS constants,
                // so we pick macOS ones (last).
                let name = if let Some((name, _)) = bitflags.iter_names().last() {
                    Cow::Borrowed(name)
                } else {
                    Cow::Owned(format!("(1 << {bit})"))
                };
                if we_requested && kernel_supports {
                    debug!("capability {name} enabled")
                } else if we_requested {
                    debug!("capability {name} not supported by kernel")
                } else if kernel_supports {
                    debug!("capability {name} not requested by client")
                } else if bitflag_is_known {
                    debug!("capability {name} not supported nor requested")
                }
            }

            // Reply with our desired version and settings.
            debug!(
                "INIT response: ABI {}.{}, flags {:#x}, max readahead {}, max write {}",
                abi::FUSE_KERNEL_VERSION,
                abi::FUSE_KERNEL_MINOR_VERSION,
                init.capabilities() & config.requested,
                config.max_readahead,
                config.max_write
            );

            let response = init.reply(&config);
            <ReplyRaw as Reply>::new(request.unique(), ReplySender::Channel(self.ch.sender()))
                .send_ll(&response);

            return Ok(());
        }
    }

    /// Unmount the filesystem
    pub fn unmount(&mut self) -> io::Result<()> {
        self.mount.umount()
    }

    /// Returns a thread-safe object that can be used to unmount the Filesystem
    pub fn unmount_callable(&mut self) -> SessionUnmounter {
        SessionUnmounter {
            mount: self.mount.mount.clone(),
        }
    }

    /// Returns an object that can be used to send notifications to the kernel
    pub fn notifier(&self) -> Notifier {
        Notifier::new(self.ch.sender())
    }
}

#[derive(Debug)]
/// A thread-safe object that can be used to unmount a Filesystem
pub struct SessionUnmounter {
    mount: Arc<Mutex<Option<Mount>>>,
}

impl SessionUnmounter {
    /// Unmount the filesystem
    pub fn unmount(&mut self) -> io::Result<()> {
        if let Some(mount) = std::mem::take(&mut *self.mount.lock()) {
            mount.umount()?;
        }
        Ok(())
    }
}

pub(crate) struct SessionEventLoop<FS: Filesystem> {
    /// Cache thread name for faster `debug!`.
    pub(crate) thread_name: String,
    pub(crate) ch: Channel,
    pub(crate) filesystem: Arc<FilesystemHolder<FS>>,
    pub(crate) allowed: SessionACL,
    pub(crate) session_owner: Uid,
    /// The workers of the session (fsprof patch).
    pool: Arc<Pool>,
    /// This worker's place in `pool.requests` (`usize::MAX`: the watcher).
    slot: usize,
}

/// The channel of one more worker: a clone of the session's `/dev/fuse` descriptor
/// (`FUSE_DEV_IOC_CLONE`) or the same one.
fn next_channel(ch: &Channel, clone_fd: bool) -> io::Result<Channel> {
    if clone_fd {
        #[cfg(target_os = "linux")]
        {
            return ch.clone_fd();
        }
        #[cfg(not(target_os = "linux"))]
        {
            return Err(io::Error::other("clone_fd is only supported on Linux"));
        }
    }
    Ok(ch.clone())
}

/// The worker threads of a running session (fsprof patch). While every worker is busy, a
/// request waits, and some worker has been on one request for [`GROW_AFTER`] asleep (it waits
/// on something: a slow lower call, an injected delay), the watcher thread starts one more
/// worker, up to `max` (libfuse's `max_threads`), so that such requests do not hold up the
/// others. Workers that are only slow to run (a loaded machine) start no more: more threads
/// would not serve sooner, and each costs memory (fsprof keeps per-thread profiles); growing
/// whenever every worker was busy made a pool serving four callers grow to fourteen threads.
/// Workers stay until the session ends (as libfuse's by default): one that ended when idle
/// would be started again at the next burst. While every worker is busy, none reads the device,
/// so none would see the connection end: the watcher polls for that too, so that
/// `Filesystem::disconnected` still comes.
#[derive(Debug)]
struct Pool {
    max: usize,
    clone_fd: bool,
    /// The session's channel, which more workers' channels are made from.
    ch: Channel,
    /// Workers waiting for a request.
    idle: AtomicUsize,
    /// Workers in all (the first `total` of `requests` are theirs).
    total: AtomicUsize,
    /// Each worker's requests: odd while it serves one.
    requests: Box<[Requests]>,
    /// The workers not yet joined.
    threads: Mutex<Vec<JoinHandle<io::Result<()>>>>,
    /// Whether the connection has ended (`Filesystem::disconnected` was called).
    ended: AtomicBool,
    /// Held to change between "some worker waits for a request" and "none does", and to
    /// wake the watcher on it (or on the end).
    watch: Mutex<()>,
    /// Wakes the watcher.
    watched: Condvar,
    /// How long a worker waits after a forget (`Config::forget_pause`).
    forget_pause: Option<Duration>,
    /// Requests the watcher read while every worker was busy and the pool at its bound (it
    /// reads to find interrupts), for the next worker that is free; oldest first.
    held: Mutex<VecDeque<Held>>,
}

/// A request read by the watcher, waiting for a worker: its bytes, the channel its reply goes
/// to (the one it was read from) and its id.
#[derive(Debug)]
struct Held {
    ch: ChannelSender,
    data: Vec<u8>,
    unique: u64,
}

/// The most requests the watcher holds (each at most a request's size; a write of 1 MiB).
const MAX_HELD: usize = 64;

/// A worker's request count (odd while it serves one) and its thread id, on a cache line of
/// their own (each worker changes its count twice a request).
#[derive(Debug, Default)]
#[repr(align(64))]
struct Requests {
    count: AtomicU64,
    tid: AtomicI32,
}

impl Requests {
    /// Whether the worker sleeps (`S` or `D` in `/proc/self/task/TID/stat`): it waits on
    /// something, rather than waits for a CPU.
    fn asleep(&self) -> bool {
        let tid = self.tid.load(Ordering::Acquire);
        std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).is_ok_and(|stat| {
            // The state follows the command name, which ends at the last ')'.
            stat.rsplit_once(')')
                .is_some_and(|(_, rest)| matches!(rest.trim_start().as_bytes().first(), Some(b'S' | b'D')))
        })
    }
}

/// What the watcher found on the device.
#[derive(Debug, PartialEq, Eq)]
enum Device {
    /// Nothing.
    Quiet,
    /// A request waits to be read.
    Waiting,
    /// The connection has ended.
    Gone,
}

/// How long a request waits with every worker busy before another starts (see [`Pool`]).
const GROW_AFTER: Duration = Duration::from_millis(5);

impl Pool {
    /// Wakes the watcher: no worker waits for a request any more, or one does again, or the
    /// connection has ended.
    fn wake_watcher(&self) {
        let _held = self.watch.lock();
        self.watched.notify_all();
    }

    /// Whether no worker waits for a request.
    fn saturated(&self) -> bool {
        self.idle.load(Ordering::Acquire) == 0
    }

    /// The workers' request counts now.
    fn counts(&self) -> Vec<u64> {
        let n = self.total.load(Ordering::Acquire).min(self.requests.len());
        self.requests[..n]
            .iter()
            .map(|r| r.count.load(Ordering::Acquire))
            .collect()
    }

    /// Joins the workers in the list, until it is empty; the first error.
    fn join_workers(&self) -> io::Result<()> {
        let mut reply = Ok(());
        loop {
            let Some(thread) = self.threads.lock().pop() else {
                return reply;
            };
            let res = thread
                .join()
                .unwrap_or_else(|_| Err(io::Error::other("event loop thread panicked")));
            if let Err(e) = res {
                if reply.is_ok() {
                    reply = Err(e);
                }
            }
        }
    }
}

impl<FS: Filesystem> SessionEventLoop<FS> {
    fn event_loop(&self) -> io::Result<()> {
        // Buffer for receiving requests from the kernel. Only one is allocated and
        // it is reused immediately after dispatching to conserve memory and allocations.
        let mut buf = FuseReadBuf::new();
        let buf = buf.as_mut();
        self.pool.requests[self.slot]
            .tid
            .store(nix::unistd::gettid().as_raw(), Ordering::Release);
        loop {
            // fsprof patch: the requests the watcher read while every worker was busy come
            // first (they came before any the device still holds).
            let held = self.pool.held.lock().pop_front();
            if let Some(h) = held {
                if let Some(req) = RequestWithSender::new(h.ch, &h.data) {
                    self.serve(&req);
                }
                continue;
            }
            // Read the next request from the given channel to kernel driver
            // The kernel driver makes sure that we get exactly one request per read
            match self.ch.receive_retrying(buf) {
                Ok(size) => match RequestWithSender::new(self.ch.sender(), &buf[..size]) {
                    // Dispatch request
                    Some(req) => {
                        if let Ok(Operation::Destroy(_)) = req.request.operation() {
                            req.reply::<ReplyEmpty>().ok();
                            return Ok(());
                        } else {
                            self.serve(&req);
                        }
                    }
                    // Quit loop on illegal request
                    None => {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "Invalid request",
                        ));
                    }
                },
                Err(nix::errno::Errno::ENODEV) => {
                    self.end();
                    return Ok(());
                }
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Serves one request as a busy worker (counted, so that the watcher sees it), then waits
    /// `Config::forget_pause` after a forget.
    fn serve(&self, req: &RequestWithSender<'_>) {
        let count = &self.pool.requests[self.slot].count;
        count.fetch_add(1, Ordering::Release);
        if self.pool.idle.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.pool.wake_watcher();
        }
        let pause = self.pool.forget_pause.filter(|_| {
            matches!(
                req.request.operation(),
                Ok(Operation::Forget(_) | Operation::BatchForget(_))
            )
        });
        req.dispatch(self);
        count.fetch_add(1, Ordering::Release);
        if self.pool.idle.fetch_add(1, Ordering::AcqRel) == 0 {
            self.pool.wake_watcher();
        }
        // fsprof patch: let the kernel gather the next forgets.
        if let Some(p) = pause {
            thread::sleep(p);
        }
    }

    /// fsprof patch: every worker is busy and the pool at its bound, so no one reads the
    /// device, and an interrupt (or a killed caller's) would wait for a worker. The watcher
    /// reads what waits there on a non-blocking clone of its own: an `INTERRUPT` goes to the
    /// file system at once (or, for a request still held here, answers it `EINTR`); any other
    /// request is held for the next free worker ([`Pool::held`], at most [`MAX_HELD`]), or
    /// served here if a worker has come free meanwhile (it may be waiting on the device).
    fn read_while_busy(&self, reader: &Channel, buf: &mut [u8]) {
        let pool = &*self.pool;
        while pool.saturated() && pool.held.lock().len() < MAX_HELD {
            let size = match reader.try_receive(buf) {
                Ok(size) => size,
                Err(nix::errno::Errno::EINTR | nix::errno::Errno::ENOENT) => continue,
                Err(_) => return,
            };
            let Some(req) = RequestWithSender::new(reader.sender(), &buf[..size]) else {
                return;
            };
            if let Ok(Operation::Interrupt(x)) = req.request.operation() {
                let RequestId(target) = x.unique();
                let held = {
                    let mut h = pool.held.lock();
                    h.iter().position(|h| h.unique == target).and_then(|i| h.remove(i))
                };
                match held {
                    Some(h) => <ReplyRaw as Reply>::new(
                        RequestId(h.unique),
                        ReplySender::Channel(h.ch),
                    )
                    .send_ll(&ResponseErrno(ll::Errno::EINTR)),
                    None => req.dispatch(self),
                }
                continue;
            }
            if pool.saturated() {
                pool.held.lock().push_back(Held {
                    ch: reader.sender(),
                    data: buf[..size].to_vec(),
                    unique: req.request.unique().0,
                });
            } else {
                req.dispatch(self);
            }
        }
    }

    /// The connection has ended: tells the file system, once.
    fn end(&self) {
        if !self.pool.ended.swap(true, Ordering::AcqRel) {
            if let Some(fs) = &self.filesystem.fs {
                fs.disconnected();
            }
        }
        self.pool.wake_watcher();
    }

    /// The watcher: while every worker is busy, waits for a request to wait too; then, if
    /// [`GROW_AFTER`] later every worker is still busy, a request waits, and some worker is
    /// still on the request it had and asleep, starts another worker. Sees the connection end (`POLLERR`)
    /// meanwhile. With the pool at its bound it polls for the end alone (no events asked for, so
    /// queued requests do not wake it).
    fn watch(&self) -> io::Result<()> {
        let pool = &*self.pool;
        // fsprof patch: a clone of the device that never blocks, to read interrupts while every
        // worker is busy (`read_while_busy`), and its buffer, made when first needed.
        let mut reader: Option<(Channel, FuseReadBuf)> = None;
        loop {
            {
                let mut held = pool.watch.lock();
                while !pool.saturated() && !pool.ended.load(Ordering::Acquire) {
                    pool.watched.wait(&mut held);
                }
            }
            if pool.ended.load(Ordering::Acquire) {
                return Ok(());
            }
            let full = pool.total.load(Ordering::Acquire) >= pool.max;
            let room = pool.held.lock().len() < MAX_HELD;
            match self.poll_device(!full || room, 200)? {
                Device::Gone => {
                    self.end();
                    return Ok(());
                }
                Device::Quiet => continue,
                Device::Waiting if full => {
                    if reader.is_none() {
                        match next_channel(&pool.ch, true).and_then(|c| {
                            c.set_nonblocking()?;
                            Ok(c)
                        }) {
                            Ok(c) => reader = Some((c, FuseReadBuf::new())),
                            Err(e) => {
                                warn!("cannot read interrupts while every worker is busy: {e}");
                                thread::sleep(Duration::from_millis(200));
                                continue;
                            }
                        }
                    }
                    if let Some((r, buf)) = reader.as_mut() {
                        self.read_while_busy(r, buf.as_mut());
                    }
                    // Nothing more to read now (or no room): wait before polling again, unless
                    // a worker comes back.
                    let mut held = pool.watch.lock();
                    if pool.saturated() && !pool.ended.load(Ordering::Acquire) {
                        let _ = pool.watched.wait_for(&mut held, GROW_AFTER);
                    }
                    continue;
                }
                Device::Waiting => {}
            }
            let before = pool.counts();
            {
                // A worker coming back ends this wait early, and takes the request.
                let mut held = pool.watch.lock();
                if pool.saturated() && !pool.ended.load(Ordering::Acquire) {
                    let _ = pool.watched.wait_for(&mut held, GROW_AFTER);
                }
            }
            // A worker still on the request it had, and asleep.
            let stuck = || {
                let now = pool.counts();
                (before.iter().zip(&now).enumerate())
                    .any(|(i, (b, n))| b == n && b % 2 == 1 && pool.requests[i].asleep())
            };
            if pool.saturated() && stuck() && self.poll_device(true, 0)? == Device::Waiting {
                self.grow();
            }
        }
    }

    /// Polls the device for `timeout_ms`: for a waiting request too if `requests`.
    fn poll_device(&self, requests: bool, timeout_ms: u16) -> io::Result<Device> {
        let events = if requests {
            PollFlags::POLLIN
        } else {
            PollFlags::empty()
        };
        let mut fd = [PollFd::new(self.ch.as_fd(), events)];
        match poll(&mut fd, PollTimeout::from(timeout_ms)) {
            Ok(0) | Err(nix::errno::Errno::EINTR) => Ok(Device::Quiet),
            Ok(_) => {
                let r = fd[0].revents().unwrap_or(PollFlags::empty());
                if r.intersects(PollFlags::POLLERR | PollFlags::POLLHUP | PollFlags::POLLNVAL) {
                    Ok(Device::Gone)
                } else if r.contains(PollFlags::POLLIN) {
                    Ok(Device::Waiting)
                } else {
                    Ok(Device::Quiet)
                }
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Starts one more worker if there is room (none waits for a request); whether there is one
    /// more.
    fn grow(&self) -> bool {
        let pool = &self.pool;
        let mut total = pool.total.load(Ordering::Acquire);
        loop {
            if total >= pool.max || pool.ended.load(Ordering::Acquire) {
                return false;
            }
            match pool.total.compare_exchange_weak(
                total,
                total + 1,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(now) => total = now,
            }
        }
        pool.idle.fetch_add(1, Ordering::AcqRel);
        let slot = total;
        let thread_name = format!("fuser-{slot}");
        let started = next_channel(&pool.ch, pool.clone_fd).and_then(|ch| {
            let event_loop = SessionEventLoop {
                thread_name: thread_name.clone(),
                filesystem: self.filesystem.clone(),
                ch,
                allowed: self.allowed,
                session_owner: self.session_owner,
                pool: pool.clone(),
                slot,
            };
            thread::Builder::new()
                .name(thread_name)
                .spawn(move || event_loop.event_loop())
        });
        match started {
            Ok(thread) => {
                pool.threads.lock().push(thread);
                true
            }
            Err(e) => {
                pool.idle.fetch_sub(1, Ordering::AcqRel);
                pool.total.fetch_sub(1, Ordering::AcqRel);
                warn!("could not start another worker: {e}");
                false
            }
        }
    }
}

/// The background session data structure
#[derive(Debug)]
pub struct BackgroundSession {
    /// Thread guard of the background session
    pub guard: JoinHandle<io::Result<()>>,
    /// Object for creating Notifiers for client use
    sender: ChannelSender,
    /// Ensures the filesystem is unmounted when the session ends
    mount: Option<Mount>,
}

impl BackgroundSession {
    /// Unmount the filesystem and join the background thread.
    pub fn umount_and_join(mut self) -> io::Result<()> {
        if let Some(mount) = self.mount.take() {
            mount.umount()?;
        }
        self.join()
    }

    /// Returns an object that can be used to send notifications to the kernel
    pub fn notifier(&self) -> Notifier {
        Notifier::new(self.sender.clone())
    }

    /// Join the filesystem thread.
    pub fn join(self) -> io::Result<()> {
        self.guard
            .join()
            .map_err(|_panic: Box<dyn std::any::Any + Send>| {
                io::Error::new(
                    io::ErrorKind::Other,
                    "filesystem background thread panicked",
                )
            })?
    }
}
