//! Statistics of the observables (to be written).
