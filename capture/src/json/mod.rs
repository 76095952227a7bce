//! The packet JSON of `packet-json.md`: [`write`](mod@write) for `roce decode --json`, [`read`] for
//! `roce encode`.

pub mod read;
pub mod write;
