//! The FUSE protocol, the bottom of the crate: what the kernel and the daemon say to each other,
//! known to every part above and knowing none of them.
//!
//! * [`abi`]: the kernel's structs (`include/uapi/linux/fuse.h`) and opcodes, a request's
//!   decoding and a reply's header, as the io_uring transport reads and writes them (the
//!   classic transport leaves this to fuser).
//! * [`ops`]: the operations a file system serves and the lower system calls it makes, named
//!   and numbered as the profile's tables.
//! * [`errno`]: the errno a reply carries for an error.

pub mod abi;
pub mod errno;
pub mod ops;
