//! One FUSE ring queue: an io_uring of 128-byte SQEs owned by one thread, and the buffers of its
//! entries, which the kernel writes requests into and reads replies from. This holds all of the
//! io_uring transport's `unsafe`; what it offers is safe.
//!
//! # The life of an entry (kernel `fs/fuse/dev_uring.c`)
//!
//! 1. `REGISTER` (an `IORING_OP_URING_CMD` SQE on `/dev/fuse`, `cmd_op` 1, `addr` pointing at
//!    two iovecs `[header, payload]`, `len` 2, the command area a `fuse_uring_cmd_req` naming
//!    the queue) hands the buffers to the kernel. The command stays pending.
//! 2. When a request for this queue (the queue of the CPU the caller runs on) arrives, the
//!    kernel copies it into the buffers and completes the command with 0.
//! 3. The daemon serves it, writes the reply into the same buffers and sends
//!    `COMMIT_AND_FETCH` (`cmd_op` 2, the request's `commit_id`): the kernel takes the reply
//!    and keeps the command pending for the next request, as in 1.
//! 4. At unmount or abort every pending command completes with `-ENOTCONN`, and a commit sent
//!    after that at once with `-ENOTCONN`: the entry is finished.
//!
//! # The invariant that makes it sound
//!
//! From an SQE that hands an entry's buffers to the kernel until that command's completion, the
//! kernel may write into them at any time (from task work or an io-wq worker), so no reference
//! to them exists then: they are kept as raw pointers and lent to the caller ([`Event::Request`])
//! only between a completion and the next SQE. They are freed only after every entry's last
//! command has completed without the kernel keeping the entry (`-ENOTCONN`, or a `REGISTER`
//! refused outright); a queue dropped earlier leaks them rather than free them under the kernel.
//! The iovec array a `REGISTER` points at lives as long as the buffers (the kernel reads it when
//! it issues the command, which may be later, in an io-wq worker).

#![allow(unsafe_code)]

use std::io;
use std::mem::ManuallyDrop;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::ptr::NonNull;

use io_uring::squeue::Entry128;
use io_uring::{IoUring, cqueue, opcode, types};
use zerocopy::IntoBytes;

use crate::protocol::abi::{UringCmdReq, UringReqHeader, new_header, uring_cmd};

/// Bytes in a page: payload buffers start at a page boundary, so a read's data lands in them
/// ready for `O_DIRECT`, and are whole pages long.
pub const PAGE: usize = 4096;

/// The system's page size (`sysconf(_SC_PAGESIZE)`), in which the kernel counts a request's
/// pages.
pub fn page_size() -> usize {
    // SAFETY: sysconf only reads a constant of the system.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(n).ok().filter(|&n| n > 0).unwrap_or(PAGE)
}

/// What the kernel is doing with an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// `REGISTER` pending.
    Registering,
    /// `COMMIT_AND_FETCH` pending.
    Fetching,
    /// Finished: the kernel no longer holds the buffers.
    Finished,
    /// Finished with an error after which the kernel may still hold the buffers.
    Lost,
}

/// One entry: its buffers (owned through raw pointers, see the module documentation).
struct Slot {
    header: NonNull<UringReqHeader>,
    /// The payload buffer: anonymous memory of its own, page-aligned, whose pages the kernel
    /// provides (zeroed) only when first written, so a large buffer costs nothing until a large
    /// request fills it.
    payload: NonNull<u8>,
    len: usize,
    iov: NonNull<[libc::iovec; 2]>,
    state: State,
}

impl Slot {
    fn new(pages: usize) -> io::Result<Slot> {
        let len = pages * PAGE;
        // SAFETY: a new private anonymous mapping at an address the kernel picks; nothing else
        // refers to it. It is unmapped once, in `free`.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let payload = NonNull::new(p.cast::<u8>()).expect("mmap does not return null");
        let header = NonNull::from(Box::leak(new_header()));
        let iov = Box::new([
            libc::iovec {
                iov_base: header.as_ptr().cast(),
                iov_len: size_of::<UringReqHeader>(),
            },
            libc::iovec {
                iov_base: payload.as_ptr().cast(),
                iov_len: len,
            },
        ]);
        Ok(Slot {
            header,
            payload,
            len,
            iov: NonNull::from(Box::leak(iov)),
            state: State::Finished,
        })
    }

    /// The buffers.
    ///
    /// # Safety
    ///
    /// The kernel must not be using them (no command of the entry pending) and no other
    /// reference to them may exist while the returned ones live.
    unsafe fn buffers<'a>(&self) -> (&'a mut UringReqHeader, &'a mut [u8]) {
        // SAFETY: the header is a live allocation of this slot and the payload a live mapping
        // of `len` readable and writable bytes; the caller guarantees exclusive access.
        unsafe {
            (
                &mut *self.header.as_ptr(),
                std::slice::from_raw_parts_mut(self.payload.as_ptr(), self.len),
            )
        }
    }

    /// Frees the buffers.
    ///
    /// # Safety
    ///
    /// The kernel must no longer hold them (the slot is [`State::Finished`]) and they must not be
    /// freed twice.
    unsafe fn free(&mut self) {
        // SAFETY: the pointers came from `Box::leak` and `mmap` in `Slot::new`; the caller
        // guarantees nobody uses them any more.
        unsafe {
            drop(Box::from_raw(self.header.as_ptr()));
            libc::munmap(self.payload.as_ptr().cast(), self.len);
            drop(Box::from_raw(self.iov.as_ptr()));
        }
    }
}

/// What a completion meant, handed to the caller of [`RingQueue::wait`].
pub enum Event<'a> {
    /// A request is in an entry's buffers. The caller leaves its reply there; the queue then
    /// commits it and fetches the next request into the same buffers.
    Request {
        /// The header buffer.
        header: &'a mut UringReqHeader,
        /// The payload buffer (page-aligned).
        payload: &'a mut [u8],
    },
    /// An entry finished because the connection ended (`-ENOTCONN`).
    Ended,
    /// An entry's command failed with `errno`; the entry is finished.
    Failed {
        /// The error.
        errno: i32,
        /// Whether it was the entry's `REGISTER` (the kernel then fell back to `/dev/fuse`).
        registering: bool,
    },
}

/// A FUSE ring queue: its io_uring and its entries.
pub struct RingQueue {
    ring: ManuallyDrop<IoUring<Entry128, cqueue::Entry>>,
    slots: Box<[Slot]>,
    qid: u16,
    /// Entries not finished.
    live: usize,
    /// Completions taken from the ring, reused on every wait (no allocation per request).
    done: Vec<(u64, i32)>,
}

impl RingQueue {
    /// A queue for CPU `qid` on the FUSE device `dev`, with `depth` entries whose payload
    /// buffers hold `payload_size` bytes (rounded up to whole pages). Nothing is registered yet.
    pub fn new(
        dev: BorrowedFd,
        qid: u16,
        depth: u16,
        payload_size: usize,
    ) -> io::Result<RingQueue> {
        let depth = depth.max(1);
        let mut b = IoUring::<Entry128, cqueue::Entry>::builder();
        // One command per entry is ever pending; completions twice that, as libfuse does.
        b.setup_cqsize(2 * u32::from(depth));
        let ring = b.build(u32::from(depth))?;
        ring.submitter().register_files(&[dev.as_raw_fd()])?;
        let pages = payload_size.div_ceil(PAGE).max(1);
        let mut slots = Vec::with_capacity(usize::from(depth));
        for _ in 0..depth {
            match Slot::new(pages) {
                Ok(s) => slots.push(s),
                Err(e) => {
                    for s in &mut slots {
                        // SAFETY: never handed to the kernel; each freed once.
                        unsafe { s.free() };
                    }
                    return Err(e);
                }
            }
        }
        Ok(RingQueue {
            ring: ManuallyDrop::new(ring),
            slots: slots.into_boxed_slice(),
            qid,
            live: 0,
            done: Vec::with_capacity(2 * usize::from(depth)),
        })
    }

    /// Entries not finished.
    pub fn live(&self) -> usize {
        self.live
    }

    /// Queues a `REGISTER` of every entry and submits them. Refusals come back as
    /// [`Event::Failed`] from the next [`RingQueue::wait`] (the kernel answers them inline).
    pub fn register(&mut self) -> io::Result<()> {
        for i in 0..self.slots.len() {
            self.push(i, uring_cmd::REGISTER, 0)?;
            self.slots[i].state = State::Registering;
            self.live += 1;
        }
        self.ring.submit()?;
        Ok(())
    }

    /// Submits what is queued, waits until at least `min` commands have completed (0: only
    /// takes what has), and handles every completion: a request is lent to `f` with its
    /// entry's buffers and its reply committed after `f` returns; other outcomes are reported to
    /// `f` as they happen. `EINTR` while waiting is not an error.
    pub fn wait(&mut self, min: usize, mut f: impl FnMut(Event<'_>)) -> io::Result<()> {
        match self.ring.submit_and_wait(min) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINTR) => {}
            Err(e) => return Err(e),
        }
        self.done.clear();
        self.done
            .extend(self.ring.completion().map(|c| (c.user_data(), c.result())));
        for k in 0..self.done.len() {
            let (idx, res) = self.done[k];
            let Some(slot) = self.slots.get_mut(idx as usize) else {
                continue;
            };
            let registering = slot.state == State::Registering;
            match res {
                0 => {
                    // SAFETY: the entry's command has completed and no new one is queued until
                    // the commit below: the kernel does not touch the buffers meanwhile, and
                    // nothing else refers to them (they are lent only here, for this call).
                    let (header, payload) = unsafe { slot.buffers() };
                    let commit_id = header.ring_ent_in_out.commit_id;
                    f(Event::Request { header, payload });
                    self.push(idx as usize, uring_cmd::COMMIT_AND_FETCH, commit_id)?;
                    self.slots[idx as usize].state = State::Fetching;
                }
                e if e == -libc::EAGAIN || e == -libc::EINTR => {
                    // Not taken: send the same command again.
                    let commit_id = if registering {
                        0
                    } else {
                        // SAFETY: as above; only the commit id is read.
                        unsafe { (*slot.header.as_ptr()).ring_ent_in_out.commit_id }
                    };
                    let cmd = if registering {
                        uring_cmd::REGISTER
                    } else {
                        uring_cmd::COMMIT_AND_FETCH
                    };
                    self.push(idx as usize, cmd, commit_id)?;
                }
                e => {
                    // A refused REGISTER leaves no entry in the kernel; `-ENOTCONN` ends every
                    // entry for good. After anything else the kernel may still hold the entry.
                    slot.state = if registering || e == -libc::ENOTCONN {
                        State::Finished
                    } else {
                        State::Lost
                    };
                    self.live -= 1;
                    f(if e == -libc::ENOTCONN {
                        Event::Ended
                    } else {
                        Event::Failed {
                            errno: -e,
                            registering,
                        }
                    });
                }
            }
        }
        Ok(())
    }

    /// Queues command `cmd` for entry `idx`.
    fn push(&mut self, idx: usize, cmd: u32, commit_id: u64) -> io::Result<()> {
        let sqe = self.sqe(idx, cmd, commit_id);
        for _ in 0..2 {
            // SAFETY: the SQE points at the entry's iovec array and, through it, its buffers,
            // which stay allocated and unmoved until the entry is finished (or are leaked).
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return Ok(());
            }
            // Full (cannot happen with one command per entry): hand what is there over first.
            self.ring.submit()?;
        }
        Err(io::Error::other("the io_uring submission queue stays full"))
    }

    /// The SQE of command `cmd` for entry `idx` (`user_data` = `idx`; `/dev/fuse` is registered
    /// file 0).
    fn sqe(&self, idx: usize, cmd: u32, commit_id: u64) -> Entry128 {
        let req = UringCmdReq {
            flags: 0,
            commit_id,
            qid: self.qid,
            padding: [0; 6],
        };
        let mut area = [0u8; 80];
        area[..size_of::<UringCmdReq>()].copy_from_slice(req.as_bytes());
        let mut b = opcode::UringCmd80::new(types::Fixed(0), cmd).cmd(area);
        if cmd == uring_cmd::REGISTER {
            b = b.addr(Some(self.slots[idx].iov.as_ptr() as u64));
        }
        let mut sqe = b.build().user_data(idx as u64);
        if cmd == uring_cmd::REGISTER {
            set_len(&mut sqe, 2);
        }
        sqe
    }
}

impl Drop for RingQueue {
    fn drop(&mut self) {
        // The ring first: closing it cancels what is still pending.
        // SAFETY: the ring is not used after this.
        unsafe { ManuallyDrop::drop(&mut self.ring) };
        if self.slots.iter().all(|s| s.state == State::Finished) {
            for s in self.slots.iter_mut() {
                // SAFETY: every entry is finished, so the kernel holds none of the buffers; each
                // slot is freed once.
                unsafe { s.free() };
            }
        } else {
            // The kernel may still write into some: leak them all rather than free them.
            log::debug!(
                "ring queue {}: leaving {} entries' buffers allocated",
                self.qid,
                self.slots.len()
            );
        }
    }
}

/// Sets `len` (offset 24 of `struct io_uring_sqe`) of a 128-byte SQE.
///
/// `REGISTER` requires `sqe->len == 2` (its iovec count), and the `io-uring` crate's
/// `UringCmd80` builder sets `addr` but not `len`.
fn set_len(sqe: &mut Entry128, len: u32) {
    const _: () = assert!(size_of::<Entry128>() == 128);
    let p = (sqe as *mut Entry128).cast::<u8>();
    // SAFETY: `Entry128` is `#[repr(C)]` around the kernel's `struct io_uring_sqe` (128 bytes,
    // asserted above), whose `__u32 len` is at byte 24 (`opcode` u8 @0, `flags` u8 @1, `ioprio`
    // u16 @2, `fd` s32 @4, `off` u64 @8, `addr` u64 @16, `len` u32 @24). The write is in bounds
    // and any u32 is valid there. Checked against the crate's own `Readv` builder below.
    unsafe { p.add(24).cast::<u32>().write_unaligned(len) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn len_of(sqe: &Entry128) -> u32 {
        let p = (sqe as *const Entry128).cast::<u8>();
        // SAFETY: as in `set_len`.
        unsafe { p.add(24).cast::<u32>().read_unaligned() }
    }

    #[test]
    fn the_len_offset_is_the_crates() {
        let iov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }];
        let e: Entry128 = opcode::Readv::new(types::Fd(0), iov.as_ptr(), 7)
            .build()
            .into();
        assert_eq!(len_of(&e), 7);
        let mut e = opcode::UringCmd80::new(types::Fixed(0), 1).build();
        assert_eq!(len_of(&e), 0);
        set_len(&mut e, 2);
        assert_eq!(len_of(&e), 2);
    }

    #[test]
    fn payload_buffers_are_page_aligned_and_whole_pages() {
        for pages in [1, 3, 256] {
            let mut s = Slot::new(pages).unwrap();
            // SAFETY: the slot was never handed to a kernel; the references die before `free`.
            let (_, p) = unsafe { s.buffers() };
            assert_eq!(p.len(), pages * PAGE);
            assert_eq!(p.as_ptr().addr() % 4096, 0);
            assert!(p.iter().all(|&b| b == 0));
            // SAFETY: the iovec the kernel is given names the same buffer.
            let iov = unsafe { &*s.iov.as_ptr() };
            assert_eq!(
                (iov[1].iov_base.cast_const(), iov[1].iov_len),
                (p.as_ptr().cast(), p.len())
            );
            // SAFETY: as above; freed once.
            unsafe { s.free() };
        }
    }
}
