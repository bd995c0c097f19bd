//! Go's `sort.Sort`, ported line by line so that `Accept` clauses (media.rs) come out in the
//! order kube-apiserver puts them in: goautoneg sorts them with a comparator that is not a
//! strict weak order, and `sort.Sort` is not stable, so the order depends on the algorithm.
//! This is Go's pattern-defeating quicksort (Go 1.22 and later) from `sort/zsortinterface.go`
//! (insertion sort up to 12 elements), with `sort.xorshift` from `sort/sort.go` and `bits.Len`
//! from `math/bits`.

/// Go's `sort.Sort` (pattern-defeating quicksort, Go 1.22 and later, as kube-apiserver 1.36
/// is built with), ported line by line from `sort/zsortinterface.go` so that goautoneg's
/// inconsistent comparator gives the same order as in the apiserver. Indices are checked:
/// an out-of-range comparison is `false` and an out-of-range swap does nothing, which the
/// algorithm never asks for, but no input can make this panic.
pub(super) fn go_sort<T, F: Fn(&T, &T) -> bool>(v: &mut [T], less: F) {
    let n = v.len();
    if n <= 1 {
        return;
    }
    let Ok(end) = isize::try_from(n) else {
        return;
    };
    let mut data = SortData { v, less };
    pdqsort(&mut data, 0, end, bits_len(n));
}

struct SortData<'s, T, F> {
    v: &'s mut [T],
    less: F,
}

impl<T, F: Fn(&T, &T) -> bool> SortData<'_, T, F> {
    fn less(&self, i: isize, j: isize) -> bool {
        let a = usize::try_from(i).ok().and_then(|i| self.v.get(i));
        let b = usize::try_from(j).ok().and_then(|j| self.v.get(j));
        match (a, b) {
            (Some(a), Some(b)) => (self.less)(a, b),
            _ => false,
        }
    }

    fn swap(&mut self, i: isize, j: isize) {
        if let (Ok(i), Ok(j)) = (usize::try_from(i), usize::try_from(j)) {
            if i < self.v.len() && j < self.v.len() {
                self.v.swap(i, j);
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum SortedHint {
    Unknown,
    Increasing,
    Decreasing,
}

/// Go's `bits.Len`.
fn bits_len(n: usize) -> u32 {
    usize::BITS - n.leading_zeros()
}

/// Go's `sort.xorshift.Next` (the 64-bit triple 13, 7, 17). Also the
/// pseudo-random source of the crate's randomized model tests.
pub(crate) fn xorshift_next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

fn insertion_sort<T, F: Fn(&T, &T) -> bool>(data: &mut SortData<'_, T, F>, a: isize, b: isize) {
    let mut i = a + 1;
    while i < b {
        let mut j = i;
        while j > a && data.less(j, j - 1) {
            data.swap(j, j - 1);
            j -= 1;
        }
        i += 1;
    }
}

fn sift_down<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    lo: isize,
    hi: isize,
    first: isize,
) {
    let mut root = lo;
    loop {
        let mut child = 2 * root + 1;
        if child >= hi {
            return;
        }
        if child + 1 < hi && data.less(first + child, first + child + 1) {
            child += 1;
        }
        if !data.less(first + root, first + child) {
            return;
        }
        data.swap(first + root, first + child);
        root = child;
    }
}

fn heap_sort<T, F: Fn(&T, &T) -> bool>(data: &mut SortData<'_, T, F>, a: isize, b: isize) {
    let first = a;
    let lo = 0;
    let hi = b - a;
    let mut i = (hi - 1) / 2;
    while i >= 0 {
        sift_down(data, i, hi, first);
        i -= 1;
    }
    let mut i = hi - 1;
    while i >= 0 {
        data.swap(first, first + i);
        sift_down(data, lo, i, first);
        i -= 1;
    }
}

fn pdqsort<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    mut a: isize,
    mut b: isize,
    mut limit: u32,
) {
    const MAX_INSERTION: isize = 12;
    let mut was_balanced = true;
    let mut was_partitioned = true;
    loop {
        let length = b - a;
        if length <= MAX_INSERTION {
            insertion_sort(data, a, b);
            return;
        }
        if limit == 0 {
            heap_sort(data, a, b);
            return;
        }
        if !was_balanced {
            break_patterns(data, a, b);
            limit -= 1;
        }
        let (mut pivot, mut hint) = choose_pivot(data, a, b);
        if hint == SortedHint::Decreasing {
            reverse_range(data, a, b);
            pivot = (b - 1) - (pivot - a);
            hint = SortedHint::Increasing;
        }
        if was_balanced
            && was_partitioned
            && hint == SortedHint::Increasing
            && partial_insertion_sort(data, a, b)
        {
            return;
        }
        if a > 0 && !data.less(a - 1, pivot) {
            a = partition_equal(data, a, b, pivot);
            continue;
        }
        let (mid, already_partitioned) = partition(data, a, b, pivot);
        was_partitioned = already_partitioned;
        let (left_len, right_len) = (mid - a, b - mid);
        let balance_threshold = length / 8;
        if left_len < right_len {
            was_balanced = left_len >= balance_threshold;
            pdqsort(data, a, mid, limit);
            a = mid + 1;
        } else {
            was_balanced = right_len >= balance_threshold;
            pdqsort(data, mid + 1, b, limit);
            b = mid;
        }
    }
}

fn partition<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    a: isize,
    b: isize,
    pivot: isize,
) -> (isize, bool) {
    data.swap(a, pivot);
    let (mut i, mut j) = (a + 1, b - 1);
    while i <= j && data.less(i, a) {
        i += 1;
    }
    while i <= j && !data.less(j, a) {
        j -= 1;
    }
    if i > j {
        data.swap(j, a);
        return (j, true);
    }
    data.swap(i, j);
    i += 1;
    j -= 1;
    loop {
        while i <= j && data.less(i, a) {
            i += 1;
        }
        while i <= j && !data.less(j, a) {
            j -= 1;
        }
        if i > j {
            break;
        }
        data.swap(i, j);
        i += 1;
        j -= 1;
    }
    data.swap(j, a);
    (j, false)
}

fn partition_equal<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    a: isize,
    b: isize,
    pivot: isize,
) -> isize {
    data.swap(a, pivot);
    let (mut i, mut j) = (a + 1, b - 1);
    loop {
        while i <= j && !data.less(a, i) {
            i += 1;
        }
        while i <= j && data.less(a, j) {
            j -= 1;
        }
        if i > j {
            break;
        }
        data.swap(i, j);
        i += 1;
        j -= 1;
    }
    i
}

fn partial_insertion_sort<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    a: isize,
    b: isize,
) -> bool {
    const MAX_STEPS: usize = 5;
    const SHORTEST_SHIFTING: isize = 50;
    let mut i = a + 1;
    for _ in 0..MAX_STEPS {
        while i < b && !data.less(i, i - 1) {
            i += 1;
        }
        if i == b {
            return true;
        }
        if b - a < SHORTEST_SHIFTING {
            return false;
        }
        data.swap(i, i - 1);
        // Shift the smaller one to the left (Go's bound is 1, not a).
        if i - a >= 2 {
            let mut j = i - 1;
            while j >= 1 {
                if !data.less(j, j - 1) {
                    break;
                }
                data.swap(j, j - 1);
                j -= 1;
            }
        }
        // Shift the greater one to the right.
        if b - i >= 2 {
            let mut j = i + 1;
            while j < b {
                if !data.less(j, j - 1) {
                    break;
                }
                data.swap(j, j - 1);
                j += 1;
            }
        }
    }
    false
}

fn break_patterns<T, F: Fn(&T, &T) -> bool>(data: &mut SortData<'_, T, F>, a: isize, b: isize) {
    let length = b - a;
    if length < 8 {
        return;
    }
    let (Ok(len_u64), Ok(len_usize)) = (u64::try_from(length), usize::try_from(length)) else {
        return;
    };
    let mut random = len_u64;
    let modulus = 1u64 << bits_len(len_usize);
    let mut idx = a + (length / 4) * 2 - 1;
    while idx <= a + (length / 4) * 2 + 1 {
        let mut other = isize::try_from(xorshift_next(&mut random) & (modulus - 1)).unwrap_or(0);
        if other >= length {
            other -= length;
        }
        data.swap(idx, a + other);
        idx += 1;
    }
}

fn choose_pivot<T, F: Fn(&T, &T) -> bool>(
    data: &mut SortData<'_, T, F>,
    a: isize,
    b: isize,
) -> (isize, SortedHint) {
    const SHORTEST_NINTHER: isize = 50;
    const MAX_SWAPS: u32 = 4 * 3;
    let l = b - a;
    let mut swaps = 0;
    let mut i = a + l / 4;
    let mut j = a + l / 4 * 2;
    let mut k = a + l / 4 * 3;
    if l >= 8 {
        if l >= SHORTEST_NINTHER {
            i = median_adjacent(data, i, &mut swaps);
            j = median_adjacent(data, j, &mut swaps);
            k = median_adjacent(data, k, &mut swaps);
        }
        j = median(data, i, j, k, &mut swaps);
    }
    match swaps {
        0 => (j, SortedHint::Increasing),
        MAX_SWAPS => (j, SortedHint::Decreasing),
        _ => (j, SortedHint::Unknown),
    }
}

fn order2<T, F: Fn(&T, &T) -> bool>(
    data: &SortData<'_, T, F>,
    a: isize,
    b: isize,
    swaps: &mut u32,
) -> (isize, isize) {
    if data.less(b, a) {
        *swaps += 1;
        return (b, a);
    }
    (a, b)
}

fn median<T, F: Fn(&T, &T) -> bool>(
    data: &SortData<'_, T, F>,
    a: isize,
    b: isize,
    c: isize,
    swaps: &mut u32,
) -> isize {
    let (a, b) = order2(data, a, b, swaps);
    let (b, _) = order2(data, b, c, swaps);
    order2(data, a, b, swaps).1
}

fn median_adjacent<T, F: Fn(&T, &T) -> bool>(
    data: &SortData<'_, T, F>,
    a: isize,
    swaps: &mut u32,
) -> isize {
    median(data, a - 1, a, a + 1, swaps)
}

fn reverse_range<T, F: Fn(&T, &T) -> bool>(data: &mut SortData<'_, T, F>, a: isize, b: isize) {
    let (mut i, mut j) = (a, b - 1);
    while i < j {
        data.swap(i, j);
        i += 1;
        j -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A consistent comparator on many elements exercises every pdqsort path: the result
    /// must be sorted and a permutation, for random, sorted, reversed and repetitive inputs.
    #[test]
    fn go_sort_sorts() {
        let mut state = 0x9E37_79B9_7F4A_7C15_u64;
        for round in 0..400_usize {
            let len = round % 97;
            let mut v: Vec<u64> = (0..len)
                .map(|i| match round % 4 {
                    0 => xorshift_next(&mut state) % 1000,
                    1 => i as u64,
                    2 => (len - i) as u64,
                    _ => xorshift_next(&mut state) % 3,
                })
                .collect();
            let mut expected = v.clone();
            expected.sort_unstable();
            go_sort(&mut v, |a, b| a < b);
            assert_eq!(v, expected, "round {round}");
        }
    }

    /// goautoneg's comparator is inconsistent: the port must still terminate, keep every
    /// clause and never panic, whatever the clauses.
    #[test]
    fn go_sort_survives_inconsistent_comparators() {
        let mut state = 42_u64;
        for round in 0..300 {
            let len = round % 70;
            let mut v: Vec<u64> = (0..len).map(|_| xorshift_next(&mut state)).collect();
            let mut before = v.clone();
            go_sort(&mut v, |a, b| (a ^ b) & 1 == 1 || a % 7 > b % 5);
            let mut after = v.clone();
            before.sort_unstable();
            after.sort_unstable();
            assert_eq!(before, after);
        }
    }
}
