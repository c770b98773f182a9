//! Where two lists differ: the one rule the incremental translation and the host index use to
//! redo only the changed middle of a list. Pure.

/// Where two lists differ, compared from both ends with `same`: `(start, old_end, new_end)`,
/// so that `old[start..old_end]` were replaced by `now[start..new_end]` and everything
/// before and after is the same. A single added, removed or changed element gives a range
/// of one.
pub(in crate::translate) fn changed_middle<A, B>(
    old: &[A],
    now: &[B],
    same: impl Fn(&A, &B) -> bool,
) -> (usize, usize, usize) {
    let start = old.iter().zip(now).take_while(|(a, b)| same(a, b)).count();
    let tail = old[start..]
        .iter()
        .rev()
        .zip(now[start..].iter().rev())
        .take_while(|(a, b)| same(a, b))
        .count();
    (start, old.len() - tail, now.len() - tail)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_middle_is_the_smallest_differing_range() {
        let eq = |a: &u8, b: &u8| a == b;
        assert_eq!(changed_middle(&[1, 2, 3], &[1, 2, 3], eq), (3, 3, 3));
        assert_eq!(changed_middle(&[1, 2, 3], &[1, 9, 2, 3], eq), (1, 1, 2));
        assert_eq!(changed_middle(&[1, 2, 3], &[1, 3], eq), (1, 2, 1));
        assert_eq!(changed_middle(&[1, 2, 3], &[1, 8, 3], eq), (1, 2, 2));
        assert_eq!(changed_middle(&[], &[4, 5], eq), (0, 0, 2));
        assert_eq!(changed_middle(&[4, 4], &[4], eq), (1, 2, 1));
    }
}
