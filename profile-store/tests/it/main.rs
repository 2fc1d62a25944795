//! Integration tests of profile-store: one binary, one module per concern.

mod format;
mod limits;
mod recorder;
mod streams;
mod sys;

#[global_allocator]
static ALLOCATOR: sys::Counting = sys::Counting;
