//! Unit tests of the node (filled in next).
