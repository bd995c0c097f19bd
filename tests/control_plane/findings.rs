//! (being written)
pub const CASES: [crate::Case; 0] = [];
