//! Name suggestions shared by both ends of the protocol: the daemon suggests the nearest
//! table, the executor the nearest column.

/// Levenshtein distance over characters (case-sensitive: lowercase both for a
/// case-insensitive distance).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::edit_distance;

    #[test]
    fn edit_distance_is_levenshtein() {
        assert_eq!(edit_distance("ohlcv", "ohlcv"), 0);
        assert_eq!(edit_distance("ohlvc", "ohlcv"), 2);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("Close", "close"), 1);
    }
}
