//! Statistics the codec benchmarks share.

/// The median of `q` (NaN if empty).
pub fn median(q: &mut [f64]) -> f64 {
    if q.is_empty() {
        return f64::NAN;
    }
    q.sort_by(f64::total_cmp);
    let h = q.len() / 2;
    if q.len() % 2 == 1 {
        q[h]
    } else {
        (q[h - 1] + q[h]) / 2.0
    }
}
