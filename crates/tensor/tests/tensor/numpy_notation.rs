//! Property tests of the numpy-notation translation: on any text it answers (a spec or an error)
//! without panicking, every spec it gives parses in our notation with one slot per operand, and a
//! generated numpy spec keeps each operand's labels, in order, with `...` spelled out as numpy
//! broadcasts it; a result repeating a label, or naming one no operand has, is refused.

use proptest::prelude::*;
use proptest::sample::select;

use rcannl_shape::spec::{AxisSpec, Kind, SlotSpec, parse_einsum};
use rcannl_tensor::nary::{numpy_to_ours, numpy_to_ours_for};

/// The labels of a slot's output row, `...` where a row variable stands.
fn output_labels(slot: &SlotSpec) -> Vec<String> {
    let row = slot.row(Kind::Output);
    let name = |axis: &AxisSpec| match axis {
        AxisSpec::Label { name } => name.clone(),
        other => other.to_string(),
    };
    let mut labels: Vec<String> = row.leading.iter().map(name).collect();
    if row.row_var.is_some() {
        labels.push("...".to_owned());
    }
    labels.extend(row.trailing.iter().map(name));
    labels
}

/// A numpy operand: letters with `...` somewhere among them, or not at all.
fn operand() -> impl Strategy<Value = (Vec<char>, Option<usize>)> {
    proptest::collection::vec(select(&['a', 'b', 'c', 'd', 'i', 'j'][..]), 0..4).prop_flat_map(
        |labels| {
            let n = labels.len();
            (Just(labels), proptest::option::of(0..=n))
        },
    )
}

/// `result` with the labels `keep` refuses and the repeated ones left out.
fn fitted(
    (labels, ellipsis): &(Vec<char>, Option<usize>),
    keep: impl Fn(&char) -> bool,
) -> (Vec<char>, Option<usize>) {
    let mut kept = Vec::new();
    let mut at = None;
    for (i, c) in labels.iter().enumerate() {
        if *ellipsis == Some(i) {
            at = Some(kept.len());
        }
        if keep(c) && !kept.contains(c) {
            kept.push(*c);
        }
    }
    let end = kept.len();
    (kept, at.or(ellipsis.map(|_| end)))
}

fn text((labels, ellipsis): &(Vec<char>, Option<usize>)) -> String {
    let mut text: String = labels.iter().collect();
    if let Some(at) = ellipsis {
        text.insert_str(*at, "...");
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_text_is_translated_or_refused(spec in "[abij,.>\\- 1]{0,16}") {
        if let Ok(ours) = numpy_to_ours(&spec) {
            let parsed = parse_einsum(&ours);
            prop_assert!(parsed.is_ok(), "{spec:?} became {ours:?}: {parsed:?}");
            let inputs = spec.split_once("->").map_or(spec.as_str(), |(inputs, _)| inputs);
            prop_assert_eq!(parsed.unwrap().arity(), inputs.split(',').count());
        }
        let axes = vec![Some(vec![2, 1, 3]); 4];
        if let Ok(ours) = numpy_to_ours_for(&spec, &axes) {
            prop_assert!(parse_einsum(&ours).is_ok(), "{spec:?} became {ours:?}");
        }
    }

    #[test]
    fn operands_keep_their_labels_in_order(
        operands in proptest::collection::vec(operand(), 1..5),
        result in operand(),
    ) {
        let inputs = operands.iter().map(text).collect::<Vec<_>>().join(",");
        // numpy refuses a result repeating a label or having one no operand has.
        let on_operands = |c: &char| operands.iter().any(|(labels, _)| labels.contains(c));
        let valid = result.0.iter().enumerate().all(|(i, c)| {
            on_operands(c) && !result.0[..i].contains(c)
        });
        let refused = numpy_to_ours(&format!("{inputs}->{}", text(&result)));
        prop_assert_eq!(refused.is_ok(), valid, "{:?}", refused);
        let result = fitted(&result, on_operands);
        let spec = format!("{inputs}->{}", text(&result));
        let ours = numpy_to_ours(&spec).expect("a well-formed numpy spec");
        let parsed = parse_einsum(&ours).expect("our notation");
        prop_assert_eq!(parsed.arity(), operands.len());
        for (slot, (labels, ellipsis)) in parsed.rhs.iter().zip(&operands) {
            let mut expected: Vec<String> = labels.iter().map(char::to_string).collect();
            if let Some(at) = ellipsis {
                expected.insert(*at, "...".to_owned());
            }
            prop_assert_eq!(output_labels(slot), expected, "{} -> {}", spec, ours);
        }
    }

    #[test]
    fn spelled_out_ellipses_align_at_the_right(
        labels in proptest::collection::vec(select(&['a', 'b', 'c'][..]), 0..3),
        axes in proptest::collection::vec(proptest::collection::vec(1usize..4, 0..4), 2..4),
    ) {
        // Every operand is `...` followed by the same labels, over axes ending in those labels'.
        let tail: String = labels.iter().collect();
        let spec = format!(
            "{}->...",
            vec![format!("...{tail}"); axes.len()].join(",")
        );
        let given: Vec<Option<Vec<usize>>> = axes
            .iter()
            .map(|dots| Some([dots.clone(), vec![5; labels.len()]].concat()))
            .collect();
        let rank = axes.iter().map(Vec::len).max().unwrap_or(0);
        let broadcast: Vec<usize> = (0..rank)
            .map(|p| {
                axes.iter()
                    .filter_map(|dots| (p + dots.len()).checked_sub(rank).map(|j| dots[j]))
                    .filter(|&d| d != 1)
                    .max()
                    .unwrap_or(1)
            })
            .collect();
        let fits = axes.iter().all(|dots| {
            dots.iter().enumerate().all(|(j, &d)| d == 1 || d == broadcast[rank - dots.len() + j])
        });
        match numpy_to_ours_for(&spec, &given) {
            Ok(ours) => {
                prop_assert!(fits, "{spec} over {axes:?} should not broadcast: {ours}");
                let parsed = parse_einsum(&ours).expect("our notation");
                // The result holds one label per broadcast axis (a scalar result none); an
                // operand's axis of 1 facing a longer one has a label of its own, the others the
                // result's.
                let result: Vec<String> = output_labels(&parsed.lhs);
                prop_assert_eq!(result.len(), rank);
                for (slot, dots) in parsed.rhs.iter().zip(&axes) {
                    let own = output_labels(slot);
                    for (j, &d) in dots.iter().enumerate() {
                        let p = rank - dots.len() + j;
                        prop_assert_eq!(own[j] == result[p], d != 1 || broadcast[p] == 1, "{}", ours);
                    }
                }
            }
            Err(e) => prop_assert!(!fits, "{spec} over {axes:?}: {e}"),
        }
    }
}
