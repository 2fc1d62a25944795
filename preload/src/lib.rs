//! # fsprof-preload
//!
//! An `LD_PRELOAD` library that times a program's file-system calls at the C-library
//! boundary, from the caller's side, into log2 latency buckets (the `user` layer, operations named
//! `SYS_...`: `docs/format.md#user-level-calls`), and optionally traces every call. It is the
//! engine of `fsprof run`; the `user-trace` crate starts programs with it and reads what it
//! records.
//!
//! ```text
//! FSPROF_SHM=/proc/<pid>/fd/<n>  FSPROF_TRACE=/abs/trace  LD_PRELOAD=.../libfsprof_preload.so  COMMAND
//! ```
//!
//! * **What is timed**: the functions of [`abi::CALLS`]: open/openat/creat, close, dup,
//!   read/write in every form (`pread`, `readv`, `preadv2`...), lseek, the stat family
//!   (including `statx` and the pre-2.33 `__xstat` entry points), statfs, access, mkdir/rmdir,
//!   unlink, rename, link, symlink, readlink, remove, truncate, fsync/fdatasync, fallocate,
//!   copy_file_range, sendfile, the directory stream calls and getdents64, chmod/chown/utimes,
//!   chdir, the xattr calls, fcntl and flock, and the stdio stream calls. `64` variants,
//!   fortified entry points (`__open_2`, `__read_chk`, `__pread_chk`, `__fread_chk`...) and
//!   `_unlocked` stream variants count under the plain name. Calls the C library makes inside
//!   itself (stdio's own reads, `remove`'s unlink) are not seen: the user layer is what the
//!   program called.
//! * **Recording**: into a shared region that `fsprof run` creates (see [`abi`] for its
//!   layout): each thread claims a slot with one atomic add and then writes only its own slot,
//!   with plain load-then-store; slots outlive their threads and processes, so the counts of a
//!   process that ends by `_exit`, `exec` or a signal are all there, with no exit handler. When
//!   slots run out, and for calls made by a signal handler that interrupted the library's own
//!   bookkeeping, counts go to an overflow slot with atomic adds. Counts are exact.
//! * **Processes**: threads claim their own slots; a fork child forgets its parent's slot
//!   (a `pthread_atfork` handler) and claims its own; an exec'd image attaches again from the
//!   environment, which keeps `LD_PRELOAD`.
//! * **Traces**: with `FSPROF_TRACE`, each call is also encoded (about 10 to 20 bytes, plus
//!   paths) into the slot's buffer in the shared region and written to the trace file in
//!   chunks of up to 64 KiB; `fsprof run` writes what is left in the buffers after the program
//!   ends, however it ended. Each process image (the command, and each program after an exec)
//!   also writes one chunk with its command name and program when it attaches. The format is
//!   in [`abi`] and `docs/format.md#user-level`.
//!
//! Limitations: statically linked programs and programs that make system calls directly (Go,
//! `syscall(2)`) are not seen. A process made by `clone` without the C library's `fork` (no
//! fork handlers run) would share its parent thread's slot. A `vfork` child runs on its
//! parent's thread until it execs, so the few calls it may make before that are counted (and
//! traced) as its parent's. Memory-mapped I/O is not seen. Supported targets: Linux on x86_64
//! and aarch64 (variadic arguments are read as named ones, see [`hooks`]).
//!
//! The modules depend on each other in one direction only, from the bottom up: [`abi`], [`sys`];
//! [`fds`], [`image`]; [`region`]; [`record`]; [`hooks`].

#![allow(unsafe_code)]
#![warn(missing_docs)]

#[cfg(not(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
)))]
compile_error!("fsprof-preload supports Linux on x86_64 and aarch64 only");

pub mod abi;
mod fds;
pub mod hooks;
mod image;
mod record;
mod region;
mod sys;

/// Attaches the process image as soon as the library is loaded, before `main`: maps the region
/// and registers the fork handler. Hooks called earlier (from other libraries' constructors)
/// attach on their own.
extern "C" fn init() {
    let saved = sys::errno();
    region::attach_now();
    sys::set_errno(saved);
}

#[used]
#[unsafe(link_section = ".init_array")]
static INIT: extern "C" fn() = init;

#[cfg(test)]
mod tests {
    use super::abi;

    #[test]
    fn environment_names_match_the_contract() {
        // region.rs reads these as C string literals.
        assert_eq!(abi::ENV_SHM, "FSPROF_SHM");
        assert_eq!(abi::ENV_TRACE, "FSPROF_TRACE");
    }

    #[test]
    fn the_inline_bucket_is_profile_stores_bucket_at_resolution_one() {
        let r = profile_store::Resolution::ONE;
        for c in (0..64).flat_map(|k| {
            let p = 1u64 << k;
            [p - 1, p, p + 1, p | (p >> 1)]
        }) {
            assert_eq!(63 - (c | 1).leading_zeros() as usize, r.bucket(c), "{c}");
        }
        assert_eq!(
            63 - (u64::MAX | 1).leading_zeros() as usize,
            r.bucket(u64::MAX)
        );
    }

    #[test]
    fn a_record_of_two_longest_strings_fits_a_buffer() {
        assert!(abi::CALLS.iter().all(|c| c.sig.matches('p').count() <= 2));
        const { assert!(abi::MAX_RECORD_FIXED + 2 * (abi::MAX_STRING + 4) < abi::TRACE_BUFFER) };
        // Call, start, latency and result, then each item at its longest (strings aside).
        let fixed = abi::CALLS
            .iter()
            .map(|c| {
                31 + c
                    .sig
                    .bytes()
                    .map(|b| match b {
                        b'p' => 0,
                        b't' => 20,
                        b'F' => 40,
                        _ => 10,
                    })
                    .sum::<usize>()
            })
            .max()
            .unwrap();
        assert!(fixed <= abi::MAX_RECORD_FIXED, "{fixed}");
    }
}
