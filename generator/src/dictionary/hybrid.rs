//! Parquet's RLE / bit-packed hybrid encoding, which carries both the definition and
//! repetition levels and the dictionary keys of a data page.
//!
//! A stream is a sequence of runs, each led by a ULEB128 header: `count << 1` for a
//! repeated run (then the value in `ceil(bit_width / 8)` little-endian bytes), or
//! `groups << 1 | 1` for a bit-packed run of `8 * groups` values, `bit_width` bits
//! each, least significant bit first. Only the last bit-packed run of a stream may be
//! padded (the page says how many values it holds).

/// Shortest stretch of equal values written as a repeated run: below 8 it would split
/// a bit-packed group.
const MIN_REPEAT: usize = 8;
/// Most values in one bit-packed run (63 groups): a one-byte header, and the bound
/// other writers keep to.
const MAX_PACKED_VALUES: usize = 63 * 8;

/// Bits needed to hold `max_value` (at least 1, so that every reader accepts it).
pub(crate) fn bit_width(max_value: u32) -> u8 {
    (32 - max_value.leading_zeros()).max(1) as u8
}

fn put_uleb128(out: &mut Vec<u8>, mut value: u64) {
    loop {
        let byte = (value & 0x7f) as u8;
        value >>= 7;
        if value == 0 {
            out.push(byte);
            return;
        }
        out.push(byte | 0x80);
    }
}

/// Appends `values` (each below `2^bit_width`) to `out`, hybrid-encoded.
pub(crate) fn encode(values: &[u16], bit_width: u8, out: &mut Vec<u8>) {
    encode_runs(values, bit_width, out, |_, _| {});
}

/// [`encode`], adding to `counts[v]` the number of times each value `v` occurs (the
/// level histograms, counted a run at a time).
pub(crate) fn encode_counting(
    values: &[u16],
    bit_width: u8,
    out: &mut Vec<u8>,
    counts: &mut [i64],
) {
    encode_runs(values, bit_width, out, |value, run| {
        counts[usize::from(value)] += run as i64
    });
}

/// [`encode`], telling `on_run` each stretch of equal values.
#[inline(always)]
fn encode_runs(
    values: &[u16],
    bit_width: u8,
    out: &mut Vec<u8>,
    mut on_run: impl FnMut(u16, usize),
) {
    debug_assert!((1..=16).contains(&bit_width));
    debug_assert!(values.iter().all(|&v| u32::from(v) < 1u32 << bit_width));
    let mut literal_start = 0;
    let mut i = 0;
    while i < values.len() {
        let value = values[i];
        let mut end = i + 1;
        while end < values.len() && values[end] == value {
            end += 1;
        }
        let run = end - i;
        on_run(value, run);
        if run >= MIN_REPEAT {
            // The literals before the run must fill whole groups: lend them the first
            // few values of the run.
            let lend = (8 - (i - literal_start) % 8) % 8;
            if run - lend >= MIN_REPEAT {
                put_packed(&values[literal_start..i + lend], bit_width, out);
                put_repeated(value, run - lend, bit_width, out);
                literal_start = end;
            }
        }
        i = end;
    }
    put_packed(&values[literal_start..], bit_width, out);
}

fn put_repeated(value: u16, count: usize, bit_width: u8, out: &mut Vec<u8>) {
    put_uleb128(out, (count as u64) << 1);
    let bytes = value.to_le_bytes();
    out.extend_from_slice(&bytes[..usize::from(bit_width).div_ceil(8)]);
}

/// Bit-packs `values` in runs of at most [`MAX_PACKED_VALUES`]; a length that is not a
/// multiple of 8 is padded with zeros (only at the end of a stream).
fn put_packed(values: &[u16], bit_width: u8, out: &mut Vec<u8>) {
    for run in values.chunks(MAX_PACKED_VALUES) {
        let groups = run.len().div_ceil(8);
        put_uleb128(out, ((groups as u64) << 1) | 1);
        let width = usize::from(bit_width);
        out.reserve(groups * width);
        // 8 values of at most 16 bits fill at most 128 bits: `width` whole bytes. The
        // last group is padded with zeros.
        for group in run.chunks(8) {
            let mut acc: u128 = 0;
            for (i, &v) in group.iter().enumerate() {
                acc |= u128::from(v) << (i * width);
            }
            out.extend_from_slice(&acc.to_le_bytes()[..width]);
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A decoder written straight from the format description: the reference the
    /// encoder is checked against (the file-level tests read pages with parquet's own).
    pub(crate) fn decode(mut data: &[u8], bit_width: u8, count: usize) -> Vec<u16> {
        let mut out = Vec::with_capacity(count);
        while out.len() < count {
            let mut header = 0u64;
            let mut shift = 0;
            loop {
                let byte = data[0];
                data = &data[1..];
                header |= u64::from(byte & 0x7f) << shift;
                shift += 7;
                if byte & 0x80 == 0 {
                    break;
                }
            }
            if header & 1 == 0 {
                let n = (header >> 1) as usize;
                let width_bytes = usize::from(bit_width).div_ceil(8);
                let mut value = 0u16;
                for (k, b) in data[..width_bytes].iter().enumerate() {
                    value |= u16::from(*b) << (8 * k);
                }
                data = &data[width_bytes..];
                out.extend(std::iter::repeat_n(value, n));
            } else {
                let n = (header >> 1) as usize * 8;
                let bytes = n * usize::from(bit_width) / 8;
                for k in 0..n {
                    let mut value = 0u16;
                    for b in 0..usize::from(bit_width) {
                        let bit = k * usize::from(bit_width) + b;
                        value |= u16::from((data[bit / 8] >> (bit % 8)) & 1) << b;
                    }
                    out.push(value);
                }
                data = &data[bytes..];
            }
        }
        assert!(data.is_empty(), "{} bytes after the last run", data.len());
        out.truncate(count);
        out
    }

    #[test]
    fn widths() {
        assert_eq!(bit_width(0), 1);
        assert_eq!(bit_width(1), 1);
        assert_eq!(bit_width(2), 2);
        assert_eq!(bit_width(1023), 10);
        assert_eq!(bit_width(1024), 11);
        assert_eq!(bit_width(65_535), 16);
    }

    #[test]
    fn runs_and_literals_mix() {
        let mut values = vec![3u16; 20];
        values.extend([1, 2, 3, 1, 2]);
        values.extend(vec![0u16; 9]);
        values.extend(0..1_100u16);
        values.extend(vec![7u16; 3]);
        let mut out = Vec::new();
        encode(&values, 11, &mut out);
        assert_eq!(decode(&out, 11, values.len()), values);
        // The 20 threes are one repeated run: header and two value bytes.
        assert_eq!(&out[..3], &[40, 3, 0]);
    }

    proptest! {
        #[test]
        fn round_trips(
            width in 1u8..=16,
            runs in proptest::collection::vec((any::<u16>(), 1usize..30), 0..60),
        ) {
            let mask = ((1u32 << width) - 1) as u16;
            let values: Vec<u16> = runs
                .iter()
                .flat_map(|&(v, n)| std::iter::repeat_n(v & mask, n))
                .collect();
            let mut out = Vec::new();
            encode(&values, width, &mut out);
            prop_assert_eq!(decode(&out, width, values.len()), values);
        }
    }
}
