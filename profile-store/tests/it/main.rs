//! Integration tests of profile-store: one binary, one module per concern.

mod format;
mod recorder;
