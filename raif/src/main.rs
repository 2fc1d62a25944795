//! `raif`: the program comes with the file system.

fn main() {}
