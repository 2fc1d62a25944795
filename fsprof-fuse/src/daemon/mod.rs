//! The daemon's set-up.

pub mod app;
pub mod cli;
pub mod daemon_log;
pub mod kernel;
pub mod metrics;
pub mod mount;
pub mod setup;
