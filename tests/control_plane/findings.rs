//! What real traffic found that no stand-in could, each pinned against the real
//! apiserver.

pub const CASES: [crate::Case; 0] = [];
