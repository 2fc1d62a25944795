//! The trace's note of a process image (trace version 2): when an image attaches with tracing
//! on (the command, and each program after an exec), it appends one chunk with its command
//! name and its program, so that readers name processes instead of numbering them. A fork
//! child writes none: it is its parent's image until it execs.

use std::ffi::CStr;

use crate::abi::{self, ChunkHeader, Origin};
use crate::sys;

/// Appends this image's chunk to the trace at `trace`; whether it was written.
pub fn announce(trace: &CStr) -> bool {
    let mut comm = [0u8; abi::COMM_LEN];
    let n = sys::comm(&mut comm);
    let mut exe = [0u8; abi::MAX_STRING];
    let m = sys::readlink(c"/proc/self/exe", &mut exe);
    let mut payload = [0u8; abi::IMAGE_PAYLOAD];
    let len = abi::encode_image(&mut payload, &comm[..n], &exe[..m]);
    let h = ChunkHeader {
        kind: abi::CHUNK_IMAGE,
        flags: 0,
        len: len as u32,
        slot: u32::MAX,
        seq: 0,
        pid: sys::getpid(),
        tid: sys::gettid(),
        ppid: sys::getppid(),
        origin: Origin::Image.code(),
        parent_slot: u32::MAX,
        born: profile_store::clock::now(),
        base: 0,
        payload_crc: abi::crc32(0, &payload[..len]),
    }
    .encode();
    sys::append(trace, &h, &payload[..len])
}
