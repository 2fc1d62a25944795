//! The FUSE protocol: the kernel's structs and opcodes, and the names of the operations.

pub mod abi;
pub mod errno;
pub mod ops;
