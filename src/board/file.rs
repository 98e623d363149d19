//! File board (to be written).
