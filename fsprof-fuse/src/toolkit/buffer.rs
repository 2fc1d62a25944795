//! Reusable per-thread buffers aligned for direct I/O.
//!
//! A file opened with `O_DIRECT` keeps it on the lower descriptor, so that direct I/O through a
//! mount bypasses the lower page cache as it would on the lower file system; that file system
//! then wants buffers aligned to its logical block size (512 B or 4 KiB). Reply buffers that
//! transports lend for reads, and the copy a file system makes of a direct write's data, come
//! from an [`Aligned`] buffer: allocated once per thread, grown when needed, never shrunk.

/// Alignment of the slices [`Aligned::get`] hands out: enough for `O_DIRECT` on any common
/// device.
pub const DIO_ALIGN: usize = 4096;

/// A growable buffer whose slices start at a [`DIO_ALIGN`] boundary.
#[derive(Debug, Default)]
pub struct Aligned(Vec<u8>);

impl Aligned {
    /// An empty buffer (nothing allocated until first used).
    pub const fn new() -> Aligned {
        Aligned(Vec::new())
    }

    /// `len` bytes starting at an aligned address (their contents are whatever was there).
    pub fn get(&mut self, len: usize) -> &mut [u8] {
        if self.0.len() < len + DIO_ALIGN {
            self.0.resize(len + DIO_ALIGN, 0);
        }
        let start = self.0.as_ptr().addr().wrapping_neg() % DIO_ALIGN;
        &mut self.0[start..start + len]
    }
}

/// Whether `data` starts at a [`DIO_ALIGN`] boundary.
pub fn is_aligned(data: &[u8]) -> bool {
    data.as_ptr().addr() % DIO_ALIGN == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_are_aligned_whatever_their_length() {
        let mut b = Aligned::new();
        for len in [0, 1, 511, 4096, 100_000, 3] {
            let s = b.get(len);
            assert_eq!(s.len(), len);
            assert!(is_aligned(s));
        }
    }
}
