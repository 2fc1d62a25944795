//! `fsprof`: the command line comes with the command layer.

fn main() {}
