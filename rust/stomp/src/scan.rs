//! Byte search without a per-byte loop: eight bytes at a time (SWAR), in safe code.

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The index of the first `needle` in `haystack`.
pub fn find_byte(haystack: &[u8], needle: u8) -> Option<usize> {
    let repeated = LO * u64::from(needle);
    let mut chunks = haystack.chunks_exact(8);
    let mut offset = 0;
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let x = u64::from_le_bytes(word) ^ repeated;
        // A zero byte in x is a match; the lowest set high bit marks the first one.
        let found = x.wrapping_sub(LO) & !x & HI;
        if found != 0 {
            return Some(offset + (found.trailing_zeros() / 8) as usize);
        }
        offset += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == needle)
        .map(|at| offset + at)
}

/// Whether `needle` occurs in `haystack`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    find(haystack, needle).is_some()
}

/// The index of the first occurrence of `needle` (not empty) in `haystack`.
pub fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    let (&first, rest) = needle.split_first()?;
    let mut from = 0;
    while let Some(at) = find_byte(haystack.get(from..)?, first) {
        let start = from + at;
        if haystack.get(start + 1..start + needle.len()) == Some(rest) {
            return Some(start);
        }
        from = start + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_like_a_loop() {
        let data: Vec<u8> = (0..200u16).map(|i| (i * 7 % 251) as u8).collect();
        for needle in [0u8, 1, 7, 250, 255] {
            for start in 0..data.len() {
                let hay = &data[start..];
                assert_eq!(
                    find_byte(hay, needle),
                    hay.iter().position(|&b| b == needle)
                );
            }
        }
        assert_eq!(find(b"abc\nversion:1", b"\nversion:"), Some(3));
        assert_eq!(find(b"\nversio", b"\nversion:"), None);
        assert!(contains(b"x\n\n", b"\n\n"));
    }
}
