//! Maps split into shards, each behind its own lock, keyed by dense integers (node ids, inode
//! numbers, handle numbers): the inode store's and the handle tables' (also RAIF's).

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use parking_lot::RwLock;

/// Shards of a [`Sharded`] map.
pub const SHARDS: usize = 64;

/// Multiplicative hasher for integer keys (node ids and inode numbers are dense integers).
#[derive(Default)]
pub struct IntHasher(u64);

impl Hasher for IntHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(29) ^ n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// Shards of a map, each behind its own lock ([`shard_of`] picks one).
pub type Sharded<K, V> = Box<[RwLock<IntMap<K, V>>]>;

/// An empty [`Sharded`] map.
pub fn sharded<K, V>() -> Sharded<K, V> {
    (0..SHARDS)
        .map(|_| RwLock::new(IntMap::default()))
        .collect()
}

/// The shard of a [`Sharded`] map that holds key `x` (a node id or another dense integer).
#[inline]
pub fn shard_of(x: u64) -> usize {
    (x.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % SHARDS
}

/// `HashMap` with [`IntHasher`].
pub type IntMap<K, V> = HashMap<K, V, BuildHasherDefault<IntHasher>>;
