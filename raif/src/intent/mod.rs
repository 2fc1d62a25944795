//! The write-intent log: which rows of which files were being written, so that after an
//! unclean stop exactly those are resynchronised before the volume is served (md's
//! write-intent bitmap), and, while a branch is failed, what the rows being written need to be
//! rebuilt (md's partial-parity log).
//!
//! # Why
//!
//! A RAIF4/5 write updates a data unit and then the row's parity (a RAIF1 write, one copy after
//! the other). A crash in between leaves the row *torn*: its parity does not match the data.
//! Nothing looks wrong while every branch is there, but when one fails, its unit is computed
//! from the torn parity and comes out wrong, even where it holds bytes fsync'd long ago (the
//! RAID-5 write hole).
//!
//! # Entries
//!
//! Before a striped file's row or a mirrored file's range is written, an entry naming the file
//! and the *region* (a [`REGION`]-sized, aligned range of the file) is appended to the log of
//! one branch: a branch the write does not touch where there is one (so the log write does not
//! queue behind the data), else any online one. A region stays *live* until the next clearing
//! cycle, so a run of writes to one region costs one entry.
//!
//! * A write that could tear bytes it does not write (a read-modify-write of part of a row
//!   whose other units hold data; any rewrite of a whole row within the file) waits for its
//!   entry to be on stable storage (`fdatasync` of the log, shared by the writers waiting at
//!   that moment).
//! * Other writes (appends: every other unit of the row lies past the end of the file; mirror
//!   copies, which tear into an old and a new version, each byte one or the other) do not wait:
//!   their entry is written first, so a crash of the daemon always finds it; a power cut may
//!   lose it, and then nothing written before is at risk, only the consistency of the rows
//!   being written (scrub finds and repairs those).
//! * A write while a branch is failed that leaves another unit of the row (one that lives only
//!   in the parity now) at risk logs *partial parity*: the XOR of the row's units it does not
//!   write, over the range it writes, with which the parity is rebuilt after a crash without the
//!   missing branch (and it waits for stable storage).
//! * A hole punched (or a range zeroed) over whole rows while a branch is failed logs those
//!   rows as being *zeroed*: after a crash without the missing branch, zeros are written again
//!   on every part, parity included, where they are not zeros already (and it waits for stable
//!   storage). While a branch is failed every write logs partial parity, so a write into such
//!   rows after the punch always has an entry of its own that keeps its bytes.
//!
//! # Clearing
//!
//! Each branch keeps two log files and appends to one of them. Every [`Journal::cycle`] (the
//! mount's clearing thread, every couple of seconds): appends switch to the other file, the
//! epoch is raised (writes from then on log their regions again), the writes of the old epoch
//! are waited for, the branches are synced if any of its entries was of the waiting kind (their
//! data and parity must be on stable storage before the entry goes), and the file appended to
//! before the switch is emptied. So the logs hold the entries of about two cycles, clearing
//! costs a `syncfs` only where overwrites happened, and it needs no new inode or block on a
//! full branch. A clean unmount removes the files.
//!
//! # Replay
//!
//! At mount, before anything is served ([`replay`]): every online branch's log is read; for each
//! file named there the parts are opened (by the path recorded, or, for a file renamed since,
//! found by a walk of one branch), the size the parts imply is adopted where it is larger than
//! the one recorded (an append cut short before the record was written), and every logged
//! region is resynchronised: RAIF4/5 parity recomputed from the data units, RAIF1 copies made
//! equal to one copy. With a branch failed, partial-parity entries rebuild the parity of the
//! rows they cover and zeroing entries zero their rows again, each byte from the latest entry
//! that covers it; entries that cannot be replayed without the missing branch are kept for a
//! mount that has it.
//!
//! # Format
//!
//! `.raif-intent` and `.raif-intent.1` at each branch root (hidden from the mount), each a
//! sequence of records, each
//! `"RIL2" LEN CRC SEQ KIND ID PATHLEN PATH BODY` (little-endian; `LEN` the whole record, `CRC`
//! a CRC-32 of what follows it); `KIND` 1 is a region (`BODY` = `START END`, byte offsets),
//! 2 partial parity (`BODY` = `ROW COL OFFSET LEN BYTES`), 3 rows being zeroed (`BODY` =
//! `FIRST END`, rows), with 0x80 set on the last record of one append (a region and its
//! partial parity are one append). A record that does not check out (a write cut short) ends
//! the log, and the records before it of an append it was part of are not replayed: the
//! write they announced had not started. Records of the format before (`"RIL1"`, no marks)
//! are read, each on its own.

mod journal;
mod record;
mod replay;

pub use journal::{Journal, Live, Writing};
pub use record::{Body, REGION, Record};
pub use replay::{Replayed, read_logs, replay, resum_region, resync};
