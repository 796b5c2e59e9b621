//! Kernel identity: a kernel written with its own names, so that kernels differing only in which
//! buffers they read and write are one C function.
//!
//! A deep model repeats the same few kernels once per layer (a layer norm, an activation and its
//! gradient, an optimizer's update of each parameter of one shape), each written with the
//! routine's names: its nodes (`n26`), loop variables (`l741`) and locals (`v80`). Renumbered in
//! the order the kernel first uses them (`n0`, `n1`, …; `l0`, …; `v0`, …), the text of such
//! kernels is the same, and so is what it computes: every size, precision, offset and constant is
//! spelled in it. The generator compiles each distinct text once and calls it with each
//! kernel's buffers as its arguments.

use std::collections::HashMap;

use rcannl_ir::NodeId;

/// A kernel's body with its own names, and the routine's nodes it names, in the order of their
/// own numbers (the node the body names `n0` first).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renamed {
    /// The body, every node, loop variable and local renumbered.
    pub body: String,
    /// The routine's nodes behind `n0`, `n1`, … of the body.
    pub nodes: Vec<NodeId>,
}

/// `body` (a kernel's statements as the writer writes them) with its nodes, loop variables and
/// locals renumbered in order of first use. A name is the writer's: its letter (`n`, `l`, `v`)
/// and number, alone or before a suffix of its own (`v3_lanes`, `l5_group`); every other word,
/// and every number (`1e0f`, `0x7FF0000000000000ull`), is left as it is.
pub fn rename(body: &str) -> Renamed {
    let mut numbers: [HashMap<&str, usize>; 3] = Default::default();
    let mut nodes = Vec::new();
    let mut out = String::with_capacity(body.len());
    let bytes = body.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let start = at;
        let word = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        if !word(bytes[at]) {
            // Characters outside words are copied a run at a time (ASCII or not).
            while at < bytes.len() && !word(bytes[at]) {
                at += 1;
            }
            out.push_str(&body[start..at]);
            continue;
        }
        while at < bytes.len() && word(bytes[at]) {
            at += 1;
        }
        let token = &body[start..at];
        match own_name(token) {
            Some((letter, name, suffix)) => {
                let kind = match letter {
                    b'n' => 0,
                    b'l' => 1,
                    _ => 2,
                };
                let next = numbers[kind].len();
                let number = *numbers[kind].entry(name).or_insert_with(|| {
                    if kind == 0 {
                        let id = name[1..].parse().expect("a node's number");
                        nodes.push(NodeId(id));
                    }
                    next
                });
                out.push(char::from(letter));
                out.push_str(&number.to_string());
                out.push_str(suffix);
            }
            None => out.push_str(token),
        }
    }
    Renamed { body: out, nodes }
}

/// A word that is one of the writer's names: its letter, the name (letter and number) and the
/// suffix after it (empty, or starting with `_`).
fn own_name(token: &str) -> Option<(u8, &str, &str)> {
    let letter = *token.as_bytes().first()?;
    if !matches!(letter, b'n' | b'l' | b'v') {
        return None;
    }
    let digits = token[1..].bytes().take_while(u8::is_ascii_digit).count();
    let end = 1 + digits;
    let suffix = &token[end..];
    (digits > 0 && (suffix.is_empty() || suffix.starts_with('_'))).then(|| {
        let name = &token[..end];
        (letter, name, suffix)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_renumbered_in_order_of_first_use() {
        let body = "for (int64_t l741 = begin; l741 < end; ++l741) {\n  float v80 = n170[l741] + \
                    n26[l741];\n  n173[l741] = v80 * n170[l741];\n}\n";
        let renamed = rename(body);
        assert_eq!(
            renamed.body,
            "for (int64_t l0 = begin; l0 < end; ++l0) {\n  float v0 = n0[l0] + n1[l0];\n  n2[l0] = \
             v0 * n0[l0];\n}\n"
        );
        assert_eq!(renamed.nodes, [NodeId(170), NodeId(26), NodeId(173)]);
    }

    #[test]
    fn kernels_differing_only_in_their_names_read_alike() {
        let one = "float v3 = n4[(l9)*8]; float v3_lanes[16]; n5[l9] = rc_expf(v3) + 1e0f;";
        let other = "float v7 = n12[(l2)*8]; float v7_lanes[16]; n13[l2] = rc_expf(v7) + 1e0f;";
        assert_eq!(rename(one).body, rename(other).body);
        assert_eq!(rename(other).nodes, [NodeId(12), NodeId(13)]);
        // Another size, constant or function is another kernel.
        let wider = "float v3 = n4[(l9)*9]; float v3_lanes[16]; n5[l9] = rc_expf(v3) + 1e0f;";
        assert_ne!(rename(one).body, rename(wider).body);
    }

    #[test]
    fn numbers_statics_and_other_words_are_left_alone() {
        let body = "n1[s2 + l3] = 1e0f * 0x7FF0000000000000ull + rc_k12(n1) + lanes + v + n2x;";
        assert_eq!(
            rename(body).body,
            "n0[s2 + l0] = 1e0f * 0x7FF0000000000000ull + rc_k12(n0) + lanes + v + n2x;"
        );
    }
}
