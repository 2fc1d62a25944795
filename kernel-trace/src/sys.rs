//! Safe wrappers of the system calls this crate makes: `perf_event_open` on a tracepoint, its
//! ioctls, the ring buffer's `mmap`, `poll`, and mounting tracefs. Every `unsafe` block of the
//! crate is here, each with its `// SAFETY:` argument; raw descriptors become [`OwnedFd`]s and
//! the mapped ring a [`Ring`] before safe code sees them.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use perf_event_open_sys::bindings as pb;

/// The clock perf timestamps are taken with ([`open_tracepoint`]): `CLOCK_MONOTONIC`, the
/// clock the profile's cycle rate is calibrated against.
pub const CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;

/// How a tracepoint event is opened.
#[derive(Debug, Clone, Copy)]
pub struct EventSpec {
    /// The tracepoint's id (`events/GROUP/NAME/id` in tracefs).
    pub id: u64,
    /// The CPU whose events it records.
    pub cpu: u32,
    /// Bytes written to the ring before the reader is woken ([`poll`]).
    pub wakeup_bytes: u32,
}

/// Opens a tracepoint event on one CPU (all processes), disabled, sampling every hit with its
/// time ([`CLOCK`]) and raw record; its `read(2)` gives its count and the samples the kernel
/// lost ([`read_counts`]).
pub fn open_tracepoint(spec: &EventSpec) -> io::Result<OwnedFd> {
    let mut attr = pb::perf_event_attr {
        type_: pb::PERF_TYPE_TRACEPOINT,
        size: std::mem::size_of::<pb::perf_event_attr>() as u32,
        config: spec.id,
        sample_type: (pb::PERF_SAMPLE_TIME | pb::PERF_SAMPLE_RAW) as u64,
        // Linux 6.0 and later (the FUSE tracepoints came later still).
        read_format: pb::PERF_FORMAT_LOST as u64,
        clockid: CLOCK,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    attr.__bindgen_anon_2.wakeup_watermark = spec.wakeup_bytes;
    attr.set_disabled(1);
    // Never multiplexed off the CPU.
    attr.set_pinned(1);
    attr.set_watermark(1);
    attr.set_use_clockid(1);
    // SAFETY: `attr` is a valid, initialized perf_event_attr whose `size` field says how much
    // of it the kernel may read; the kernel only reads it (and may write `size` back on E2BIG,
    // into our exclusive borrow). pid -1 with a CPU and no group are valid arguments. The
    // result is checked before it is used as a descriptor.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &mut attr,
            -1,
            spec.cpu as libc::c_int,
            -1,
            pb::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by perf_event_open, is open, and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Sends `fd`'s records into `target`'s ring (both on the same CPU).
pub fn set_output(fd: &OwnedFd, target: &OwnedFd) -> io::Result<()> {
    // SAFETY: both descriptors are open perf events (borrowed for the call); the ioctl takes
    // the target's descriptor number by value and touches no memory of ours.
    let r = unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), target.as_raw_fd()) };
    check(r)
}

/// Sets the tracepoint filter of `fd` (tracefs filter syntax, e.g. `connection == 52`).
pub fn set_filter(fd: &OwnedFd, filter: &str) -> io::Result<()> {
    let c = CString::new(filter).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `c` is a NUL-terminated string that outlives the call; the kernel copies it and
    // never writes through the pointer (the binding's `*mut` is the ioctl's C prototype).
    let r =
        unsafe { perf_event_open_sys::ioctls::SET_FILTER(fd.as_raw_fd(), c.as_ptr() as *mut _) };
    check(r)
}

/// Starts counting and sampling on `fd`.
pub fn enable(fd: &OwnedFd) -> io::Result<()> {
    // SAFETY: `fd` is an open perf event; the ioctl's argument is a plain integer (0: this
    // event only) and no memory is passed.
    let r = unsafe { perf_event_open_sys::ioctls::ENABLE(fd.as_raw_fd(), 0) };
    check(r)
}

/// What the kernel says of one event ([`read_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// How many times the tracepoint fired and passed the filter on the event's CPU. The
    /// kernel counts a hit before it writes its sample, so this includes samples it then
    /// lost or never wrote.
    pub hits: u64,
    /// Samples the kernel could not write because the ring was full (`PERF_FORMAT_LOST`:
    /// the same losses `PERF_RECORD_LOST` records report, counted as they happen).
    pub lost: u64,
}

/// The event's [`Counts`] (`read(2)` with `PERF_FORMAT_LOST`).
pub fn read_counts(fd: &OwnedFd) -> io::Result<Counts> {
    let mut v = [0u64; 2];
    // SAFETY: reads at most 16 bytes into `v`, a valid, exclusive array of two u64s; the
    // descriptor is an open perf event whose read_format is PERF_FORMAT_LOST alone, so its
    // read yields exactly the count and the lost count.
    let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr().cast(), 16) };
    match n {
        16 => Ok(Counts {
            hits: v[0],
            lost: v[1],
        }),
        n if n < 0 => Err(io::Error::last_os_error()),
        // 0: a pinned event that could not be scheduled is in error state.
        _ => Err(io::Error::other("the event is in error state")),
    }
}

fn check(r: libc::c_int) -> io::Result<()> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// The size of a page.
pub fn page_size() -> usize {
    // SAFETY: sysconf reads a constant of the system and touches no memory of ours.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// A perf event's ring buffer, mapped: a metadata page (`perf_event_mmap_page`) and `2^n`
/// data pages the kernel writes records into. Unmapped when dropped.
pub struct Ring {
    base: *mut u8,
    len: usize,
    data: *const u8,
    data_size: u64,
}

// SAFETY: the mapping is owned by the `Ring` (unmapped once, in Drop); the kernel writes the
// data area and `data_head`, and the reader only reads the records published to it (between
// the tail it wrote and the head it loaded with acquire ordering) and stores `data_tail`.
// Access from several threads is serialized by the owner (`&mut self` for reads that advance
// the tail).
unsafe impl Send for Ring {}

impl Ring {
    /// Maps the ring of `fd` with `data_pages` data pages (a power of two).
    pub fn map(fd: &OwnedFd, data_pages: usize) -> io::Result<Ring> {
        let page = page_size();
        let len = (1 + data_pages) * page;
        // SAFETY: a shared read-write mapping of a perf event's descriptor at offset 0, of
        // one metadata page plus a power of two of data pages, as perf_event_open(2) defines;
        // the address is chosen by the kernel, so no existing memory is replaced. The result
        // is checked against MAP_FAILED before use.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let base = p as *mut u8;
        Ok(Ring {
            base,
            len,
            // SAFETY: the data area starts one page into the mapping just made (`len` is
            // larger than a page).
            data: unsafe { base.add(page) },
            data_size: (data_pages * page) as u64,
        })
    }

    fn meta(&self) -> *mut pb::perf_event_mmap_page {
        self.base as *mut pb::perf_event_mmap_page
    }

    fn head_cell(&self) -> &AtomicU64 {
        // SAFETY: `data_head` is an aligned u64 inside the mapped metadata page, which lives
        // as long as `self`; the kernel updates it concurrently, so it is only accessed
        // atomically (through `AtomicU64`, which has the same layout as u64).
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.meta()).data_head)) }
    }

    fn tail_cell(&self) -> &AtomicU64 {
        // SAFETY: as for `head_cell`: `data_tail` is an aligned u64 in the mapped page, read by
        // the kernel concurrently, so accessed only atomically.
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of_mut!((*self.meta()).data_tail)) }
    }

    /// Bytes of data area.
    pub fn data_size(&self) -> u64 {
        self.data_size
    }

    /// The kernel's write position (acquire: the records before it are visible).
    pub fn head(&self) -> u64 {
        self.head_cell().load(Ordering::Acquire)
    }

    /// The reader's position.
    pub fn tail(&self) -> u64 {
        self.tail_cell().load(Ordering::Relaxed)
    }

    /// Gives the bytes before `tail` back to the kernel (release: our reads of them are done).
    pub fn set_tail(&mut self, tail: u64) {
        self.tail_cell().store(tail, Ordering::Release);
    }

    /// Copies `out.len()` bytes of the data area starting at position `pos` (taken modulo
    /// the size, wrapping around its end) into `out`. `pos..pos + out.len()` must lie between
    /// [`Ring::tail`] and [`Ring::head`]: bytes the kernel has published and not reclaimed
    /// (otherwise the copy may hold a mix of old and new bytes, never anything unsafe).
    pub fn copy(&self, pos: u64, out: &mut [u8]) {
        let size = self.data_size as usize;
        let n = out.len().min(size);
        let start = (pos % self.data_size) as usize;
        let first = n.min(size - start);
        // SAFETY: `start < size` and `start + first <= size`, and `n - first <= start`, so
        // both source ranges lie in the data area, which is mapped for the life of `self`;
        // `out` is an exclusive buffer of at least `n` bytes that cannot overlap the mapping.
        // Bytes are copied, never referenced, so the kernel writing elsewhere in the area
        // meanwhile is not a data race on anything we hold.
        unsafe {
            std::ptr::copy_nonoverlapping(self.data.add(start), out.as_mut_ptr(), first);
            std::ptr::copy_nonoverlapping(self.data, out.as_mut_ptr().add(first), n - first);
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: `base`/`len` are exactly the mapping made in `map`, unmapped only here.
        unsafe {
            libc::munmap(self.base as *mut libc::c_void, self.len);
        }
    }
}

/// Waits until one of `fds` is readable (a ring passed its wake-up mark) or `timeout_ms`
/// passes. Returns whether any was.
pub fn poll(fds: &[&OwnedFd], timeout_ms: i32) -> io::Result<bool> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|f| libc::pollfd {
            fd: f.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: `p` is a valid array of `p.len()` pollfd structs that outlives the call; the
    // kernel writes only their `revents` fields.
    let r = unsafe { libc::poll(p.as_mut_ptr(), p.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(r > 0)
}

/// Reads [`CLOCK`] in nanoseconds.
pub fn clock_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec through the valid, exclusive pointer.
    let r = unsafe { libc::clock_gettime(CLOCK, &mut ts) };
    if r != 0 {
        return 0;
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Mounts tracefs at `at`.
pub fn mount_tracefs(at: &Path) -> io::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let target = CString::new(at.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: every pointer is a NUL-terminated string that outlives the call (the source and
    // type are literals); no data argument. The kernel only reads them.
    let r = unsafe {
        libc::mount(
            c"nodev".as_ptr(),
            target.as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        )
    };
    check(r)
}
