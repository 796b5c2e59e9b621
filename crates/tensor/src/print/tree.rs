//! Trees of a tensor's graph: each tensor a node under the tensor computing from it, drawn with
//! box-drawing branches. A node is its label and what follows it on its line (the shape, a
//! leaf's kind), then lines under it (the assignment computing it, its values), then its
//! operands. The tree stops `depth` levels below the root, `…` standing for the operands of a
//! node there; a tensor read in several places is drawn once, and named with `(see above)`
//! everywhere after.

use std::collections::HashMap;

/// One tensor as a tree draws it: its label, the rest of its first line, the lines under it,
/// and its operands (by the ids a tree is drawn over).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub label: String,
    pub about: String,
    pub body: Vec<String>,
    pub operands: Vec<usize>,
}

/// The tree of `root`, down to `depth` levels below it: `node` gives each node the first time
/// the tree reaches it. Every line ends in a newline.
pub(crate) fn draw<E>(
    root: usize,
    depth: usize,
    node: &mut impl FnMut(usize) -> Result<Node, E>,
) -> Result<String, E> {
    let mut tree = Tree {
        drawn: HashMap::new(),
        out: String::new(),
    };
    tree.branch(root, depth, "", "", node)?;
    Ok(tree.out)
}

/// A tree being drawn: the labels of the nodes drawn so far, and the text.
struct Tree {
    drawn: HashMap<usize, String>,
    out: String,
}

impl Tree {
    /// Draws node `id` (with `depth` levels under it) after `first` on its first line and after
    /// `rest` on the others.
    fn branch<E>(
        &mut self,
        id: usize,
        depth: usize,
        first: &str,
        rest: &str,
        node: &mut impl FnMut(usize) -> Result<Node, E>,
    ) -> Result<(), E> {
        if let Some(label) = self.drawn.get(&id) {
            self.out += &format!("{first}{label} (see above)\n");
            return Ok(());
        }
        let Node {
            label,
            about,
            body,
            operands,
        } = node(id)?;
        self.out += &format!("{first}{label}{about}\n");
        self.drawn.insert(id, label);
        let stem = if operands.is_empty() { "  " } else { "│ " };
        for line in &body {
            self.out += &format!("{rest}{stem}{line}\n");
        }
        if depth == 0 {
            if !operands.is_empty() {
                self.out += &format!("{rest}└─ …\n");
            }
            return Ok(());
        }
        for (i, &operand) in operands.iter().enumerate() {
            let (first, more) = if i + 1 == operands.len() {
                ("└─ ", "   ")
            } else {
                ("├─ ", "│  ")
            };
            self.branch(
                operand,
                depth - 1,
                &format!("{rest}{first}"),
                &format!("{rest}{more}"),
                node,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `y = (a + b) * a` over ids: y 0, the sum 1, a 2, b 3.
    fn node(id: usize) -> Result<Node, ()> {
        let (label, body, operands) = match id {
            0 => ("y", vec!["y =: s * a;"], vec![1, 2]),
            1 => ("s", vec!["s =: a + b;"], vec![2, 3]),
            2 => ("a", vec![], vec![]),
            3 => ("b", vec!["b.grad: …"], vec![]),
            _ => return Err(()),
        };
        Ok(Node {
            label: label.to_owned(),
            about: ": 2".to_owned(),
            body: body.into_iter().map(str::to_owned).collect(),
            operands,
        })
    }

    #[test]
    fn shared_operands_are_drawn_once() {
        assert_eq!(
            draw(0, 5, &mut node).unwrap(),
            "y: 2\n\
             │ y =: s * a;\n\
             ├─ s: 2\n\
             │  │ s =: a + b;\n\
             │  ├─ a: 2\n\
             │  └─ b: 2\n\
             │       b.grad: …\n\
             └─ a (see above)\n"
        );
    }

    #[test]
    fn depth_cuts_the_operands_off() {
        assert_eq!(
            draw(0, 1, &mut node).unwrap(),
            "y: 2\n\
             │ y =: s * a;\n\
             ├─ s: 2\n\
             │  │ s =: a + b;\n\
             │  └─ …\n\
             └─ a: 2\n"
        );
        assert_eq!(
            draw(0, 0, &mut node).unwrap(),
            "y: 2\n│ y =: s * a;\n└─ …\n"
        );
        assert_eq!(draw(9, 0, &mut node), Err(()));
    }
}
