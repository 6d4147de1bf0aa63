//! Definition and repetition levels of dictionary leaves, from the Arrow arrays that
//! hold them: structs and lists, nullable or not, down to `Dictionary(UInt16, Utf8)`
//! leaves, whose keys are taken as they are.
//!
//! The walk goes one nesting level at a time over a list of slots, one per level entry
//! the leaves will have: a slot either points at an element of the array at that depth
//! or is already settled (a null or an empty list above), with the definition level it
//! reached and its repetition level.

use arrow_array::cast::AsArray;
use arrow_array::types::UInt16Type;
use arrow_array::{Array, ArrayRef, StringArray};
use arrow_schema::{DataType, Field};

/// One leaf's share of a batch: a level entry per value slot, and the keys of the
/// values that are present (definition level at its maximum), in order.
#[derive(Debug)]
pub(crate) struct LeafLevels {
    /// Definition levels.
    pub(crate) def: Vec<u16>,
    /// Repetition levels; empty when the leaf is not inside a list.
    pub(crate) rep: Vec<u16>,
    /// Keys into `vocabulary` of the present values.
    pub(crate) keys: Vec<u16>,
    /// The dictionary's values.
    pub(crate) vocabulary: StringArray,
    /// Top-level rows covered.
    pub(crate) rows: usize,
}

/// Where a slot stands: `index` into the array at the current depth, or [`SETTLED`].
#[derive(Debug, Clone, Copy)]
struct Slot {
    index: u32,
    def: u16,
    rep: u16,
}

const SETTLED: u32 = u32::MAX;

/// Whether every leaf of `data_type` is a `Dictionary(UInt16, Utf8)`, below structs and
/// lists only.
pub(crate) fn all_leaves_dictionary(data_type: &DataType) -> bool {
    match data_type {
        DataType::Dictionary(key, value) => **key == DataType::UInt16 && **value == DataType::Utf8,
        DataType::Struct(fields) => {
            !fields.is_empty() && fields.iter().all(|f| all_leaves_dictionary(f.data_type()))
        }
        DataType::List(item) => all_leaves_dictionary(item.data_type()),
        _ => false,
    }
}

/// The levels of every leaf of top-level column `array` (described by `field`), in
/// schema order. `array`'s type must pass [`all_leaves_dictionary`].
pub(crate) fn leaf_levels(field: &Field, array: &ArrayRef) -> Vec<LeafLevels> {
    assert!(
        all_leaves_dictionary(array.data_type()),
        "column {} has leaves that are not UInt16 dictionaries of strings",
        field.name()
    );
    assert!(
        u32::try_from(array.len()).is_ok_and(|n| n < SETTLED),
        "a batch holds fewer than 2^32 - 1 rows"
    );
    let slots: Vec<Slot> = (0..array.len() as u32)
        .map(|index| Slot {
            index,
            def: 0,
            rep: 0,
        })
        .collect();
    let mut out = Vec::new();
    walk(array.as_ref(), field.is_nullable(), &slots, 0, &mut out);
    for leaf in &mut out {
        leaf.rows = array.len();
    }
    out
}

fn walk(array: &dyn Array, nullable: bool, slots: &[Slot], depth: u16, out: &mut Vec<LeafLevels>) {
    let present = u16::from(nullable);
    match array.data_type() {
        DataType::Struct(_) => {
            let array = array.as_struct();
            let inner: Vec<Slot> = slots
                .iter()
                .map(|s| match s.index {
                    SETTLED => *s,
                    i if nullable && array.is_null(i as usize) => Slot {
                        index: SETTLED,
                        ..*s
                    },
                    _ => Slot {
                        def: s.def + present,
                        ..*s
                    },
                })
                .collect();
            let DataType::Struct(fields) = array.data_type() else {
                unreachable!("matched above")
            };
            for (child, f) in array.columns().iter().zip(fields) {
                walk(child.as_ref(), f.is_nullable(), &inner, depth, out);
            }
        }
        DataType::List(item) => {
            let array = array.as_list::<i32>();
            let offsets = array.value_offsets();
            let mut inner = Vec::with_capacity(slots.len() + array.values().len());
            for s in slots {
                if s.index == SETTLED {
                    inner.push(*s);
                    continue;
                }
                let i = s.index as usize;
                if nullable && array.is_null(i) {
                    inner.push(Slot {
                        index: SETTLED,
                        ..*s
                    });
                    continue;
                }
                let (start, end) = (offsets[i] as u32, offsets[i + 1] as u32);
                if start == end {
                    inner.push(Slot {
                        index: SETTLED,
                        def: s.def + present,
                        rep: s.rep,
                    });
                    continue;
                }
                for k in start..end {
                    inner.push(Slot {
                        index: k,
                        // The list is there, and so is this element of its repeated
                        // group.
                        def: s.def + present + 1,
                        rep: if k == start { s.rep } else { depth + 1 },
                    });
                }
            }
            walk(
                array.values().as_ref(),
                item.is_nullable(),
                &inner,
                depth + 1,
                out,
            );
        }
        DataType::Dictionary(..) => {
            let dict = array.as_dictionary::<UInt16Type>();
            let keys = dict.keys().values();
            let mut leaf = LeafLevels {
                def: Vec::with_capacity(slots.len()),
                rep: Vec::with_capacity(if depth > 0 { slots.len() } else { 0 }),
                keys: Vec::with_capacity(slots.len()),
                vocabulary: dict.values().as_string::<i32>().clone(),
                rows: 0,
            };
            for s in slots {
                let def = match s.index {
                    SETTLED => s.def,
                    i if nullable && dict.is_null(i as usize) => s.def,
                    i => {
                        leaf.keys.push(keys[i as usize]);
                        s.def + present
                    }
                };
                leaf.def.push(def);
                if depth > 0 {
                    leaf.rep.push(s.rep);
                }
            }
            out.push(leaf);
        }
        other => unreachable!("all_leaves_dictionary admitted {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use arrow_array::{DictionaryArray, ListArray, StructArray, UInt16Array};
    use arrow_buffer::{NullBuffer, OffsetBuffer};
    use arrow_schema::Fields;

    fn dict(keys: Vec<Option<u16>>) -> ArrayRef {
        let values = Arc::new(StringArray::from(vec!["a", "b", "c"]));
        Arc::new(DictionaryArray::new(UInt16Array::from(keys), values))
    }

    fn dict_type() -> DataType {
        DataType::Dictionary(Box::new(DataType::UInt16), Box::new(DataType::Utf8))
    }

    #[test]
    fn flat_nullable() {
        let field = Field::new("n", dict_type(), true);
        let leaves = leaf_levels(&field, &dict(vec![Some(2), None, Some(0)]));
        assert_eq!(leaves.len(), 1);
        assert_eq!(leaves[0].def, [1, 0, 1]);
        assert!(leaves[0].rep.is_empty());
        assert_eq!(leaves[0].keys, [2, 0]);
    }

    /// `list<struct<a, b>>` with a null list, an empty list, a null item and a null
    /// leaf: the levels Parquet's three-level lists give them.
    #[test]
    fn list_of_structs() {
        let inner = Fields::from(vec![
            Field::new("a", dict_type(), true),
            Field::new("b", dict_type(), true),
        ]);
        let items = StructArray::new(
            inner.clone(),
            vec![
                dict(vec![Some(0), Some(1), None, Some(2)]),
                dict(vec![Some(1), Some(1), Some(0), None]),
            ],
            Some(NullBuffer::from(vec![true, false, true, true])),
        );
        let item = Arc::new(Field::new("item", DataType::Struct(inner), true));
        // Rows: [x0, x1], null, [], [x2, x3].
        let list = ListArray::new(
            Arc::clone(&item),
            OffsetBuffer::new(vec![0, 2, 2, 2, 4].into()),
            Arc::new(items),
            Some(NullBuffer::from(vec![true, false, true, true])),
        );
        let field = Field::new("l", DataType::List(item), true);
        let leaves = leaf_levels(&field, &(Arc::new(list) as ArrayRef));
        assert_eq!(leaves.len(), 2);
        assert_eq!(leaves[0].def, [4, 2, 0, 1, 3, 4]);
        assert_eq!(leaves[0].rep, [0, 1, 0, 0, 0, 1]);
        assert_eq!(leaves[0].keys, [0, 2]);
        assert_eq!(leaves[1].def, [4, 2, 0, 1, 4, 3]);
        assert_eq!(leaves[1].keys, [1, 0]);
        assert!(leaves.iter().all(|l| l.rows == 4));
    }

    #[test]
    fn plain_leaves_are_not_ours() {
        assert!(!all_leaves_dictionary(&DataType::Utf8));
        assert!(all_leaves_dictionary(&dict_type()));
        let mixed = Fields::from(vec![
            Field::new("a", dict_type(), true),
            Field::new("b", DataType::Utf8, true),
        ]);
        assert!(!all_leaves_dictionary(&DataType::Struct(mixed)));
    }
}
