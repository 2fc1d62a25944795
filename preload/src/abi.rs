//! The contract between the preload library (which writes) and `user-trace` (which creates,
//! reads and replays): the call table, the shared region's byte layout and the trace file's
//! byte layout. Both crates compile this one file (`user-trace` includes it by path), so the
//! two sides cannot drift apart. It holds constants, plain functions and no `unsafe`.
//!
//! See `docs/format.md#user-level` for the same layouts in prose.
//!
//! # Call table
//!
//! [`CALLS`] lists every timed C-library function once, by its profile name
//! (`docs/format.md#user-level-calls`: `SYS_` and the function in upper case, without a `64` suffix
//! and without fortification prefixes) and its argument signature in the trace. A call's id is its
//! index. Changing the table changes both version numbers below.
//!
//! # Shared region (version [`REGION_VERSION`])
//!
//! Little-endian, native alignment, created zeroed by `fsprof run` and laid out by the first
//! process that attaches:
//!
//! ```text
//! offset  size  header field
//!      0     8  magic "FSPRSHM\0"
//!      8     4  version
//!     12     4  state: 0 fresh, 1 being laid out, 2 ready (atomic)
//!     16     4  calls in the call table
//!     20     4  slot size in bytes
//!     24     4  slot capacity
//!     28     4  next slot to claim (atomic; may pass the capacity)
//!     32     4  trace buffer bytes per slot
//!     40     8  process images attached (atomic)
//!     48     8  calls counted in the overflow slot (atomic)
//!     56     8  calls counted but not traced (atomic)
//!     64     8  trace chunks that could not be written (atomic)
//!     72     8  trace chunks written (atomic)
//! OVERFLOW_OFFSET: the overflow counters (ROWS × COUNTERS_PER_CALL u64, atomic adds; a row
//!                  per call and descriptor kind, `kind × calls + call`)
//! slots_offset(calls): slot 0, then slot 1, ... each `slot size` bytes
//! ```
//!
//! A slot belongs to one thread of one process image; only that thread writes it:
//!
//! ```text
//! offset  size  slot field
//!      0     4  pid
//!      4     4  tid
//!      8     4  parent pid
//!     12     4  origin: 0 first thread of an image (the command, or after exec), 1 forked
//!               child, 2 another thread
//!     16     4  slot of the thread that forked this process (origin 1), else u32::MAX
//!     20     4  state: 0 free, 1 claimed (atomic, release after the fields above)
//!     24     8  clock at the claim (origin 1: at the fork)
//!     32     4  trace bytes in the buffer, not yet written (atomic)
//!     36     4  1 while the owner writes a chunk to the trace file (atomic)
//!     40     4  chunks written by the owner (atomic)
//!     48     8  clock base of the buffer's first record (atomic)
//! SLOT_COUNTERS: per row (call and kind) COUNTERS_PER_CALL u64: count, total cycles, 64 buckets
//! slot_buffer_offset(calls): the trace buffer
//! ```
//!
//! # Trace file (version [`TRACE_VERSION`])
//!
//! ```text
//! file        = file-header *chunk
//! file-header = "FSPTRACE" version:u32 header-len:u32 cycles-per-sec:u64 ref-cycles:u64
//!               ref-mono-ns:u64 ref-unix-ns:u64 clock:u8 invariant:u8 pad:u16
//!               root-len:u32 root argc:u32 *(arg-len:u32 arg) header-crc:u32
//! chunk       = chunk-header payload            ; kind 2: one thread's records, in order;
//!                                               ; kind 3 (version 2): a process image
//! chunk-header (CHUNK_HEADER bytes):
//!   magic:u32 "FPCK" kind:u8 flags:u8 header-len:u16 payload-len:u32 slot:u32 seq:u32
//!   pid:u32 tid:u32 ppid:u32 origin:u8 pad:3 parent-slot:u32 born:u64 base:u64
//!   payload-crc:u32 header-crc:u32
//! payload     = *record                          ; kind 2
//!             / comm exe                         ; kind 3, strings as the `p` item below
//! record      = call:varint start:zigzag latency:varint result:zigzag args
//! ```
//!
//! A record's `call` is the call id, plus its descriptor's kind ([`KINDS`]) shifted left by
//! [`KIND_SHIFT`] where the call's descriptor is not a file (version 3; before, always 0).
//!
//! A process image writes one kind 3 chunk when it attaches (the command, and each program
//! after an exec), before its records: `comm` is its command name (`PR_GET_NAME`, at most
//! [`COMM_LEN`] bytes), `exe` the program (`/proc/self/exe`). Its header holds the pid, tid
//! and parent pid, origin 0, slot `u32::MAX`, and the clock at the attach as `born`. Version 1
//! traces have no such chunk; readers read both versions.
//!
//! `start` is the record's clock reading minus the previous record's in the chunk (the first:
//! minus `base`). `result` is the return value, or `-errno` where the function failed (see
//! [`RESULTS`]). `args` follow the call's signature, one item per letter:
//!
//! | letter | item | encoding |
//! |---|---|---|
//! | `d` | descriptor (`AT_FDCWD` is -100; a stream's or directory's descriptor) | zigzag |
//! | `p` | path or string | varint `len + 1` then bytes; 0 for a null pointer; at most [`MAX_STRING`] bytes |
//! | `x` | flags | varint |
//! | `m` | mode or mask | varint |
//! | `n` | size in bytes | varint |
//! | `o` | offset or length (-1: a null offset pointer) | zigzag |
//! | `i` | small integer (whence, command, uid, operation) | zigzag |
//! | `t` | stat result, only when `result >= 0`: file type and permission bits, size | varint, varint |
//! | `F` | fcntl argument: lock commands `type whence start len`, else the integer | zigzag × 4, or zigzag |
//!
//! Integers in headers are little-endian. CRCs are CRC-32 (IEEE). A chunk whose payload is
//! cut short by the end of the file is a torn tail; one whose CRC does not match is damaged,
//! and a reader resynchronizes on the next chunk magic. Chunks carry `(slot, seq)`; a chunk
//! seen twice (written by its thread, then again by `fsprof run` because the thread died in
//! the middle of writing it) is read once.

/// Magic at the start of the shared region.
pub const REGION_MAGIC: [u8; 8] = *b"FSPRSHM\0";
/// Layout version of the shared region (2: counters per call and descriptor kind).
pub const REGION_VERSION: u32 = 2;
/// Magic at the start of a trace file.
pub const TRACE_MAGIC: [u8; 8] = *b"FSPTRACE";
/// Format version of trace files (3: a record's call names its descriptor's kind).
pub const TRACE_VERSION: u32 = 3;
/// The oldest trace format version readers still read (version 1: no image chunks).
pub const OLDEST_TRACE_VERSION: u32 = 1;
/// Magic at the start of every chunk ("FPCK" little-endian).
pub const CHUNK_MAGIC: u32 = u32::from_le_bytes(*b"FPCK");
/// Size of a chunk header.
pub const CHUNK_HEADER: usize = 64;
/// Chunk kind: records of one thread.
pub const CHUNK_RECORDS: u8 = 2;
/// Chunk kind: a process image, its command name and program (trace version 2).
pub const CHUNK_IMAGE: u8 = 3;
/// Longest command name (`PR_GET_NAME` fills 16 bytes, its NUL included).
pub const COMM_LEN: usize = 16;
/// Largest payload of an image chunk: two strings with their varint lengths.
pub const IMAGE_PAYLOAD: usize = COMM_LEN + MAX_STRING + 2 * 3;
/// Chunk flag: written by `fsprof run` from the buffer of a thread that had ended.
pub const CHUNK_DRAINED: u8 = 1;

/// The environment variable naming the shared region (a path `fsprof run` makes readable).
pub const ENV_SHM: &str = "FSPROF_SHM";
/// The environment variable naming the trace file (absolute path; tracing is off without it).
pub const ENV_TRACE: &str = "FSPROF_TRACE";

/// Counters per call: count, total cycles and [`BUCKETS`] buckets.
pub const COUNTERS_PER_CALL: usize = 2 + BUCKETS;

/// What a descriptor is, by index: a call on a descriptor is counted under its kind, so that
/// reads of a pipe or a terminal are not taken for file-system time. 0, `file`, is everything
/// a file system holds (regular files, directories, block devices, symbolic links) and every
/// call that takes no descriptor; the others are `pipe` (pipes and FIFOs), `socket`, `chr`
/// (character devices: terminals, `/dev/null`) and `anon` (what has no file type: eventfd,
/// epoll, signalfd...). The profile keeps them apart: layer `user` (files) and `user@fd:KIND`.
pub const KINDS: [&str; 5] = ["file", "pipe", "socket", "chr", "anon"];

/// The kind of a descriptor whose `st_mode` is `mode` (index into [`KINDS`]).
pub const fn kind_of_mode(mode: u32) -> u8 {
    match mode & 0o170000 {
        0o010000 => 1,
        0o140000 => 2,
        0o020000 => 3,
        0o100000 | 0o040000 | 0o060000 | 0o120000 => 0,
        _ => 4,
    }
}

/// Counter rows of a slot: one per call and kind, row `kind × CALLS.len() + call`.
pub const ROWS: usize = CALLS.len() * KINDS.len();

/// In a trace record, the call field is `call | kind << KIND_SHIFT` ([`KINDS`]): one byte for a
/// call on a file, as before kinds were recorded.
pub const KIND_SHIFT: u32 = 7;

const _: () = assert!(
    CALLS.len() < 1 << KIND_SHIFT,
    "call ids must fit below the kind bits"
);
/// Buckets per call: resolution 1 (`docs/format.md#buckets`), 64 buckets.
pub const BUCKETS: usize = 64;
/// Bytes of trace buffer per slot: a chunk is written when it fills (ULTra's large writes).
pub const TRACE_BUFFER: usize = 64 * 1024;
/// Longest string recorded in a trace record; longer ones are cut (the length says so).
pub const MAX_STRING: usize = 4096;
/// Upper bound of an encoded record without its strings.
pub const MAX_RECORD_FIXED: usize = 160;

/// Header field offsets (bytes from the start of the region).
pub mod header {
    /// Magic.
    pub const MAGIC: usize = 0;
    /// Version.
    pub const VERSION: usize = 8;
    /// State: 0 fresh, 1 being laid out, 2 ready.
    pub const STATE: usize = 12;
    /// Calls in the table.
    pub const CALLS: usize = 16;
    /// Slot size.
    pub const SLOT_SIZE: usize = 20;
    /// Slot capacity.
    pub const SLOTS: usize = 24;
    /// Next slot to claim.
    pub const NEXT_SLOT: usize = 28;
    /// Trace buffer bytes per slot.
    pub const TRACE_BUFFER: usize = 32;
    /// Process images attached.
    pub const ATTACHES: usize = 40;
    /// Calls counted in the overflow slot.
    pub const OVERFLOW_CALLS: usize = 48;
    /// Calls counted but not traced.
    pub const UNTRACED: usize = 56;
    /// Chunks that could not be written.
    pub const WRITE_ERRORS: usize = 64;
    /// Chunks written.
    pub const CHUNKS: usize = 72;
}

/// Region state: laid out and ready.
pub const STATE_READY: u32 = 2;

/// Slot field offsets (bytes from the start of a slot).
pub mod slot {
    /// Process id.
    pub const PID: usize = 0;
    /// Thread id.
    pub const TID: usize = 4;
    /// Parent process id.
    pub const PPID: usize = 8;
    /// Origin (see [`super::Origin`]).
    pub const ORIGIN: usize = 12;
    /// Slot of the forking thread.
    pub const PARENT_SLOT: usize = 16;
    /// 1 once claimed.
    pub const STATE: usize = 20;
    /// Clock at the claim or fork.
    pub const BORN: usize = 24;
    /// Pending trace bytes.
    pub const HEAD: usize = 32;
    /// 1 while a chunk is being written.
    pub const FLUSHING: usize = 36;
    /// Chunks written.
    pub const SEQ: usize = 40;
    /// Clock base of the pending records.
    pub const BASE: usize = 48;
}

/// Offset of the overflow counters.
pub const OVERFLOW_OFFSET: usize = 4096;
/// Offset of the counters within a slot.
pub const SLOT_COUNTERS: usize = 64;

/// Rounds `n` up to a multiple of 4096.
pub const fn page_up(n: usize) -> usize {
    (n + 4095) & !4095
}

/// Offset of slot 0 for `rows` counter rows ([`ROWS`]).
pub const fn slots_offset(rows: usize) -> usize {
    OVERFLOW_OFFSET + page_up(rows * COUNTERS_PER_CALL * 8)
}

/// Offset of the trace buffer within a slot.
pub const fn slot_buffer_offset(rows: usize) -> usize {
    (SLOT_COUNTERS + rows * COUNTERS_PER_CALL * 8 + 63) & !63
}

/// Size of one slot.
pub const fn slot_size(rows: usize) -> usize {
    page_up(slot_buffer_offset(rows) + TRACE_BUFFER)
}

/// Number of slots a region of `len` bytes holds.
pub const fn capacity(len: usize, rows: usize) -> usize {
    let base = slots_offset(rows);
    if len <= base {
        0
    } else {
        (len - base) / slot_size(rows)
    }
}

/// Bytes of a region that holds `slots` slots of the current call table and kinds.
pub const fn region_len(slots: usize) -> usize {
    slots_offset(ROWS) + slots * slot_size(ROWS)
}

/// How a slot's process came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The first thread of a process image: the command itself, or a program after exec.
    Image,
    /// A child made by fork, before any exec.
    Fork,
    /// Another thread of a process.
    Thread,
}

impl Origin {
    /// The byte stored in slots and chunk headers.
    pub const fn code(self) -> u8 {
        match self {
            Origin::Image => 0,
            Origin::Fork => 1,
            Origin::Thread => 2,
        }
    }

    /// The origin of a stored byte.
    pub const fn from_code(c: u8) -> Option<Origin> {
        match c {
            0 => Some(Origin::Image),
            1 => Some(Origin::Fork),
            2 => Some(Origin::Thread),
            _ => None,
        }
    }
}

/// One entry of the call table: profile name and trace signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallSpec {
    /// Profile name, `SYS_` + the function in upper case.
    pub name: &'static str,
    /// Argument letters (see the module documentation).
    pub sig: &'static str,
}

const fn c(name: &'static str, sig: &'static str) -> CallSpec {
    CallSpec { name, sig }
}

/// What `result` holds for the calls whose return value is not the usual `int`/`ssize_t`
/// (which is the value, or `-errno` on failure).
pub const RESULTS: &str = "fopen, fdopen, freopen, opendir, fdopendir: the stream's descriptor or -errno; \
readdir: 1 for an entry, 0 at the end, -errno; fgets: bytes read, 0 at end of file or error; \
fread, fwrite: bytes transferred; fputs, fclose, fflush, fseek, fseeko: 0 or -errno; \
ftell, ftello, lseek: the position or -errno";

/// Call ids, named for the code that records them. `CALLS[id]` is the entry.
pub mod id {
    #![allow(missing_docs)]
    pub const OPEN: u8 = 0;
    pub const OPENAT: u8 = 1;
    pub const CREAT: u8 = 2;
    pub const CLOSE: u8 = 3;
    pub const READ: u8 = 4;
    pub const PREAD: u8 = 5;
    pub const READV: u8 = 6;
    pub const PREADV: u8 = 7;
    pub const PREADV2: u8 = 8;
    pub const WRITE: u8 = 9;
    pub const PWRITE: u8 = 10;
    pub const WRITEV: u8 = 11;
    pub const PWRITEV: u8 = 12;
    pub const PWRITEV2: u8 = 13;
    pub const LSEEK: u8 = 14;
    pub const STAT: u8 = 15;
    pub const LSTAT: u8 = 16;
    pub const FSTAT: u8 = 17;
    pub const FSTATAT: u8 = 18;
    pub const STATX: u8 = 19;
    pub const STATFS: u8 = 20;
    pub const FSTATFS: u8 = 21;
    pub const ACCESS: u8 = 22;
    pub const FACCESSAT: u8 = 23;
    pub const MKDIR: u8 = 24;
    pub const MKDIRAT: u8 = 25;
    pub const RMDIR: u8 = 26;
    pub const UNLINK: u8 = 27;
    pub const UNLINKAT: u8 = 28;
    pub const RENAME: u8 = 29;
    pub const RENAMEAT: u8 = 30;
    pub const RENAMEAT2: u8 = 31;
    pub const LINK: u8 = 32;
    pub const LINKAT: u8 = 33;
    pub const SYMLINK: u8 = 34;
    pub const SYMLINKAT: u8 = 35;
    pub const READLINK: u8 = 36;
    pub const READLINKAT: u8 = 37;
    pub const REMOVE: u8 = 38;
    pub const TRUNCATE: u8 = 39;
    pub const FTRUNCATE: u8 = 40;
    pub const FSYNC: u8 = 41;
    pub const FDATASYNC: u8 = 42;
    pub const FALLOCATE: u8 = 43;
    pub const POSIX_FALLOCATE: u8 = 44;
    pub const COPY_FILE_RANGE: u8 = 45;
    pub const SENDFILE: u8 = 46;
    pub const OPENDIR: u8 = 47;
    pub const FDOPENDIR: u8 = 48;
    pub const READDIR: u8 = 49;
    pub const CLOSEDIR: u8 = 50;
    pub const GETDENTS64: u8 = 51;
    pub const CHMOD: u8 = 52;
    pub const FCHMOD: u8 = 53;
    pub const FCHMODAT: u8 = 54;
    pub const CHOWN: u8 = 55;
    pub const FCHOWN: u8 = 56;
    pub const LCHOWN: u8 = 57;
    pub const FCHOWNAT: u8 = 58;
    pub const UTIMENSAT: u8 = 59;
    pub const FUTIMENS: u8 = 60;
    pub const SETXATTR: u8 = 61;
    pub const LSETXATTR: u8 = 62;
    pub const FSETXATTR: u8 = 63;
    pub const GETXATTR: u8 = 64;
    pub const LGETXATTR: u8 = 65;
    pub const FGETXATTR: u8 = 66;
    pub const LISTXATTR: u8 = 67;
    pub const LLISTXATTR: u8 = 68;
    pub const FLISTXATTR: u8 = 69;
    pub const REMOVEXATTR: u8 = 70;
    pub const LREMOVEXATTR: u8 = 71;
    pub const FREMOVEXATTR: u8 = 72;
    pub const FCNTL: u8 = 73;
    pub const FLOCK: u8 = 74;
    pub const DUP: u8 = 75;
    pub const DUP2: u8 = 76;
    pub const DUP3: u8 = 77;
    pub const CHDIR: u8 = 78;
    pub const FCHDIR: u8 = 79;
    pub const FOPEN: u8 = 80;
    pub const FDOPEN: u8 = 81;
    pub const FREOPEN: u8 = 82;
    pub const FCLOSE: u8 = 83;
    pub const FREAD: u8 = 84;
    pub const FWRITE: u8 = 85;
    pub const FGETS: u8 = 86;
    pub const FPUTS: u8 = 87;
    pub const FFLUSH: u8 = 88;
    pub const FSEEK: u8 = 89;
    pub const FSEEKO: u8 = 90;
    pub const FTELL: u8 = 91;
    pub const FTELLO: u8 = 92;
}

/// The call table, indexed by call id.
pub const CALLS: &[CallSpec] = &[
    c("SYS_OPEN", "pxm"),
    c("SYS_OPENAT", "dpxm"),
    c("SYS_CREAT", "pm"),
    c("SYS_CLOSE", "d"),
    c("SYS_READ", "dn"),
    c("SYS_PREAD", "dno"),
    c("SYS_READV", "dn"),
    c("SYS_PREADV", "dno"),
    c("SYS_PREADV2", "dnox"),
    c("SYS_WRITE", "dn"),
    c("SYS_PWRITE", "dno"),
    c("SYS_WRITEV", "dn"),
    c("SYS_PWRITEV", "dno"),
    c("SYS_PWRITEV2", "dnox"),
    c("SYS_LSEEK", "doi"),
    c("SYS_STAT", "pt"),
    c("SYS_LSTAT", "pt"),
    c("SYS_FSTAT", "dt"),
    c("SYS_FSTATAT", "dpxt"),
    c("SYS_STATX", "dpxmt"),
    c("SYS_STATFS", "p"),
    c("SYS_FSTATFS", "d"),
    c("SYS_ACCESS", "pi"),
    c("SYS_FACCESSAT", "dpix"),
    c("SYS_MKDIR", "pm"),
    c("SYS_MKDIRAT", "dpm"),
    c("SYS_RMDIR", "p"),
    c("SYS_UNLINK", "p"),
    c("SYS_UNLINKAT", "dpx"),
    c("SYS_RENAME", "pp"),
    c("SYS_RENAMEAT", "dpdp"),
    c("SYS_RENAMEAT2", "dpdpx"),
    c("SYS_LINK", "pp"),
    c("SYS_LINKAT", "dpdpx"),
    c("SYS_SYMLINK", "pp"),
    c("SYS_SYMLINKAT", "pdp"),
    c("SYS_READLINK", "pn"),
    c("SYS_READLINKAT", "dpn"),
    c("SYS_REMOVE", "p"),
    c("SYS_TRUNCATE", "po"),
    c("SYS_FTRUNCATE", "do"),
    c("SYS_FSYNC", "d"),
    c("SYS_FDATASYNC", "d"),
    c("SYS_FALLOCATE", "dioo"),
    c("SYS_POSIX_FALLOCATE", "doo"),
    c("SYS_COPY_FILE_RANGE", "dodonx"),
    c("SYS_SENDFILE", "ddon"),
    c("SYS_OPENDIR", "p"),
    c("SYS_FDOPENDIR", "d"),
    c("SYS_READDIR", "d"),
    c("SYS_CLOSEDIR", "d"),
    c("SYS_GETDENTS64", "dn"),
    c("SYS_CHMOD", "pm"),
    c("SYS_FCHMOD", "dm"),
    c("SYS_FCHMODAT", "dpmx"),
    c("SYS_CHOWN", "pii"),
    c("SYS_FCHOWN", "dii"),
    c("SYS_LCHOWN", "pii"),
    c("SYS_FCHOWNAT", "dpiix"),
    c("SYS_UTIMENSAT", "dpx"),
    c("SYS_FUTIMENS", "d"),
    c("SYS_SETXATTR", "ppnx"),
    c("SYS_LSETXATTR", "ppnx"),
    c("SYS_FSETXATTR", "dpnx"),
    c("SYS_GETXATTR", "ppn"),
    c("SYS_LGETXATTR", "ppn"),
    c("SYS_FGETXATTR", "dpn"),
    c("SYS_LISTXATTR", "pn"),
    c("SYS_LLISTXATTR", "pn"),
    c("SYS_FLISTXATTR", "dn"),
    c("SYS_REMOVEXATTR", "pp"),
    c("SYS_LREMOVEXATTR", "pp"),
    c("SYS_FREMOVEXATTR", "dp"),
    c("SYS_FCNTL", "diF"),
    c("SYS_FLOCK", "di"),
    c("SYS_DUP", "d"),
    c("SYS_DUP2", "dd"),
    c("SYS_DUP3", "ddx"),
    c("SYS_CHDIR", "p"),
    c("SYS_FCHDIR", "d"),
    c("SYS_FOPEN", "pp"),
    c("SYS_FDOPEN", "dp"),
    c("SYS_FREOPEN", "ppd"),
    c("SYS_FCLOSE", "d"),
    c("SYS_FREAD", "dn"),
    c("SYS_FWRITE", "dn"),
    c("SYS_FGETS", "dn"),
    c("SYS_FPUTS", "dn"),
    c("SYS_FFLUSH", "d"),
    c("SYS_FSEEK", "doi"),
    c("SYS_FSEEKO", "doi"),
    c("SYS_FTELL", "d"),
    c("SYS_FTELLO", "d"),
];

/// Whether an fcntl command takes a `struct flock` (so its argument is traced as a lock).
pub const fn is_lock_cmd(cmd: i64) -> bool {
    // F_GETLK 5, F_SETLK 6, F_SETLKW 7, F_OFD_GETLK 36, F_OFD_SETLK 37, F_OFD_SETLKW 38.
    matches!(cmd, 5..=7 | 36..=38)
}

/// Appends `v` as an unsigned LEB128 varint to `out`; returns the bytes written. `out` must
/// have room for 10 bytes.
#[inline]
pub fn put_varint(out: &mut [u8], mut v: u64) -> usize {
    let mut i = 0;
    while v >= 0x80 {
        out[i] = (v as u8) | 0x80;
        v >>= 7;
        i += 1;
    }
    out[i] = v as u8;
    i + 1
}

/// Encodes an image chunk's payload into `out` (at least [`IMAGE_PAYLOAD`] bytes): `comm` and
/// `exe`, each cut to its longest; returns the length.
pub fn encode_image(out: &mut [u8], comm: &[u8], exe: &[u8]) -> usize {
    let mut pos = 0;
    for (s, max) in [(comm, COMM_LEN), (exe, MAX_STRING)] {
        let s = &s[..s.len().min(max)];
        pos += put_varint(&mut out[pos..], s.len() as u64 + 1);
        out[pos..pos + s.len()].copy_from_slice(s);
        pos += s.len();
    }
    pos
}

/// An image chunk's `comm` and `exe`; `None` if the payload is not one.
pub fn decode_image(payload: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut pos = 0;
    let mut take = |max: usize| {
        let (n, k) = get_varint(payload.get(pos..)?)?;
        let n = usize::try_from(n.checked_sub(1)?)
            .ok()
            .filter(|&n| n <= max)?;
        let s = payload.get(pos + k..pos + k + n)?;
        pos += k + n;
        Some(s)
    };
    let comm = take(COMM_LEN)?;
    let exe = take(MAX_STRING)?;
    (pos == payload.len()).then_some((comm, exe))
}

/// The zigzag mapping of a signed value onto an unsigned one (small magnitudes stay small).
#[inline]
pub const fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// The inverse of [`zigzag`].
#[inline]
pub const fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Reads an unsigned LEB128 varint from the start of `inp`: the value and the bytes used;
/// `None` if `inp` ends first or the value does not fit 64 bits.
#[inline]
pub fn get_varint(inp: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in inp.iter().enumerate().take(10) {
        let part = (b & 0x7f) as u64;
        if i == 9 && part > 1 {
            return None;
        }
        v |= part << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

/// CRC-32 (IEEE, as zlib computes it) of `data`, continuing from `crc` (0 to start).
pub fn crc32(crc: u32, data: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new_with_initial(crc);
    h.update(data);
    h.finalize()
}

/// The encoded chunk header (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ChunkHeader {
    /// [`CHUNK_RECORDS`].
    pub kind: u8,
    /// [`CHUNK_DRAINED`] or 0.
    pub flags: u8,
    /// Payload bytes.
    pub len: u32,
    /// Slot of the writing thread.
    pub slot: u32,
    /// Chunk number within the slot.
    pub seq: u32,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// [`Origin::code`].
    pub origin: u8,
    /// Slot of the forking thread, or `u32::MAX`.
    pub parent_slot: u32,
    /// Clock at the slot's claim (or the fork).
    pub born: u64,
    /// Clock base of the first record.
    pub base: u64,
    /// CRC-32 of the payload.
    pub payload_crc: u32,
}

impl ChunkHeader {
    /// The header's bytes, its own CRC last.
    pub fn encode(&self) -> [u8; CHUNK_HEADER] {
        let mut b = [0u8; CHUNK_HEADER];
        b[0..4].copy_from_slice(&CHUNK_MAGIC.to_le_bytes());
        b[4] = self.kind;
        b[5] = self.flags;
        b[6..8].copy_from_slice(&(CHUNK_HEADER as u16).to_le_bytes());
        b[8..12].copy_from_slice(&self.len.to_le_bytes());
        b[12..16].copy_from_slice(&self.slot.to_le_bytes());
        b[16..20].copy_from_slice(&self.seq.to_le_bytes());
        b[20..24].copy_from_slice(&self.pid.to_le_bytes());
        b[24..28].copy_from_slice(&self.tid.to_le_bytes());
        b[28..32].copy_from_slice(&self.ppid.to_le_bytes());
        b[32] = self.origin;
        b[36..40].copy_from_slice(&self.parent_slot.to_le_bytes());
        b[40..48].copy_from_slice(&self.born.to_le_bytes());
        b[48..56].copy_from_slice(&self.base.to_le_bytes());
        b[56..60].copy_from_slice(&self.payload_crc.to_le_bytes());
        let crc = crc32(0, &b[..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        b
    }

    /// Decodes a header; `None` if the magic, size or CRC is wrong.
    pub fn decode(b: &[u8; CHUNK_HEADER]) -> Option<ChunkHeader> {
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let u64_at = |o: usize| (u32_at(o) as u64) | ((u32_at(o + 4) as u64) << 32);
        if u32_at(0) != CHUNK_MAGIC
            || u16::from_le_bytes([b[6], b[7]]) as usize != CHUNK_HEADER
            || crc32(0, &b[..60]) != u32_at(60)
        {
            return None;
        }
        Some(ChunkHeader {
            kind: b[4],
            flags: b[5],
            len: u32_at(8),
            slot: u32_at(12),
            seq: u32_at(16),
            pid: u32_at(20),
            tid: u32_at(24),
            ppid: u32_at(28),
            origin: b[32],
            parent_slot: u32_at(36),
            born: u64_at(40),
            base: u64_at(48),
            payload_crc: u32_at(56),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_spec_and_are_unique() {
        for (i, c) in CALLS.iter().enumerate() {
            let rest = c.name.strip_prefix("SYS_").expect("SYS_ prefix");
            assert!(
                rest.bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
                "{}",
                c.name
            );
            assert!(!rest.ends_with("64") || rest == "GETDENTS64", "{}", c.name);
            assert!(
                c.sig.bytes().all(|b| b"dpxmnoitF".contains(&b)),
                "{}",
                c.name
            );
            assert!(CALLS[..i].iter().all(|o| o.name != c.name), "{}", c.name);
        }
        assert!(CALLS.len() < 128, "ids must stay one-byte varints");
        assert_eq!(CALLS[id::FTELLO as usize].name, "SYS_FTELLO");
        assert_eq!(CALLS[id::FCNTL as usize].name, "SYS_FCNTL");
        assert_eq!(CALLS[id::GETDENTS64 as usize].name, "SYS_GETDENTS64");
        assert_eq!(CALLS[id::DUP3 as usize].name, "SYS_DUP3");
    }

    #[test]
    fn a_slot_fits_the_size_fsprof_run_reserves() {
        // A row per call and descriptor kind: 93 × 5 × 66 counters, and the trace buffer.
        assert!(slot_size(ROWS) <= 320 * 1024);
        assert_eq!(capacity(region_len(10), ROWS), 10);
        assert_eq!(capacity(100, ROWS), 0);
        assert!(slots_offset(ROWS) >= OVERFLOW_OFFSET + ROWS * COUNTERS_PER_CALL * 8);
        assert!(slot_buffer_offset(ROWS) >= SLOT_COUNTERS + ROWS * 8 * COUNTERS_PER_CALL);
    }

    #[test]
    fn descriptor_kinds_come_from_the_file_type() {
        let kind = |mode: u32| KINDS[kind_of_mode(mode) as usize];
        assert_eq!(kind(0o100644), "file");
        assert_eq!(kind(0o040755), "file");
        assert_eq!(kind(0o060660), "file");
        assert_eq!(kind(0o010600), "pipe");
        assert_eq!(kind(0o140777), "socket");
        assert_eq!(kind(0o020620), "chr");
        assert_eq!(kind(0o600), "anon");
    }

    #[test]
    fn varints_and_zigzag_round_trip() {
        let mut buf = [0u8; 10];
        for v in [0u64, 1, 127, 128, 300, u32::MAX as u64, u64::MAX] {
            let n = put_varint(&mut buf, v);
            assert_eq!(get_varint(&buf[..n]), Some((v, n)));
            assert_eq!(get_varint(&buf[..n - 1]), None);
        }
        for v in [0i64, -1, 1, -100, i64::MIN, i64::MAX] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(get_varint(&[0xff; 10]), None);
    }

    #[test]
    fn image_payloads_round_trip_and_cut_long_strings() {
        let mut buf = [0u8; IMAGE_PAYLOAD];
        let n = encode_image(&mut buf, b"tar", b"/usr/bin/tar");
        assert_eq!(
            decode_image(&buf[..n]),
            Some((&b"tar"[..], &b"/usr/bin/tar"[..]))
        );
        assert_eq!(decode_image(&buf[..n - 1]), None);
        let long = [b'x'; MAX_STRING + 10];
        let n = encode_image(&mut buf, &long, &long);
        assert_eq!(n, 1 + COMM_LEN + 2 + MAX_STRING);
        let (c, e) = decode_image(&buf[..n]).unwrap();
        assert_eq!((c.len(), e.len()), (COMM_LEN, MAX_STRING));
        assert_eq!(decode_image(&[]), None);
    }

    #[test]
    fn crc_matches_the_standard_check_value() {
        assert_eq!(crc32(0, b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(crc32(0, b"1234"), b"56789"), 0xCBF4_3926);
    }

    #[test]
    fn chunk_headers_round_trip_and_reject_damage() {
        let h = ChunkHeader {
            kind: CHUNK_RECORDS,
            flags: CHUNK_DRAINED,
            len: 1234,
            slot: 7,
            seq: 3,
            pid: 4242,
            tid: 4243,
            ppid: 1,
            origin: Origin::Fork.code(),
            parent_slot: 2,
            born: 99,
            base: 1 << 40,
            payload_crc: 0xdead_beef,
        };
        let mut b = h.encode();
        assert_eq!(ChunkHeader::decode(&b), Some(h));
        b[13] ^= 1;
        assert_eq!(ChunkHeader::decode(&b), None);
    }
}
