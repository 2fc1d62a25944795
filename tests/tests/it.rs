//! The cross-crate tests, one module per concern, in one test binary (a binary per file would
//! link the workspace nine times). Run one concern with `cargo test --release -p tests --test
//! it -- house_rules::`.

mod cross;
mod deb;
mod docs;
mod fleet;
mod hostile;
mod house_rules;
mod install;
mod mount8;
mod records;
