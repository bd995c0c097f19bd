//! (being written)
pub const CASES: [crate::Case; 0] = [];
pub fn is_namespace_child() -> bool {
    false
}
pub fn namespace_child() -> i32 {
    0
}
