//! The toolkit of the file systems.

pub mod attr;
pub mod buffer;
pub mod caller;
pub mod config_file;
pub mod create_as;
pub mod dircursor;
pub mod fdcache;
pub mod glob;
pub mod handle_table;
pub mod init_flags;
pub mod ioctl;
pub mod kernel_cache;
pub mod lower;
pub mod sharded;
pub mod xattr_names;
