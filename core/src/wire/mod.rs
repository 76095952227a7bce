//! Wire layer (in progress).
