//! Unit tests of the replica (filled in next).
