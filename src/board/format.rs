//! Signal-file bodies (to be written).
