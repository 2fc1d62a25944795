//! Integration tests of the `fsprof` binary, one module per command (and the inputs, errors
//! and robustness every command shares): golden outputs, synthetic profiles of known structure,
//! malformed inputs, figures, live mounts. One test binary; helpers in `util`.

mod check;
mod compare;
mod diff;
mod errors;
mod export;
mod input;
mod limits;
mod no_mount;
mod peaks;
mod plot;
mod profile;
mod report;
mod robustness;
mod show;
mod stack;
mod summary;
mod syscalls;
mod user;
mod util;
