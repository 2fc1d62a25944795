//! Trace files: the header `fsprof run` writes, the chunks of records and the process images
//! the preload library writes, and a streaming reader (see `docs/format.md#trace-file` for the
//! byte layout).

pub mod fds;
pub mod header;
pub mod names;
pub mod reader;
pub mod record;

pub use fds::FdNames;
pub use header::TraceHeader;
pub use names::{Image, Names};
pub use reader::{Chunk, ReadReport, TraceReader};
pub use record::{Arg, Record, Records, format_call, format_call_naming, format_result};
