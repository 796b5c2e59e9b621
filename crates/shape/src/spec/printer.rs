//! The canonical text of a spec.
//!
//! The canonical form is multi-character: axes are separated by `", "`, rows by `" | "` and
//! `" -> "`, slots by `"; "` and `" => "`; a kind that is the closed empty row is left out; strides
//! and dilations of 1 are left out where the grammar allows it. A text with at most one axis per row
//! and no other trigger character would be read in single-character mode, which splits multi-letter
//! names, so such a text gets a trailing `,`. Parsing the canonical text gives back the same tree.

use std::fmt::{self, Write};

use super::ast::{
    AffineSpec, AxisSpec, Coefficient, ConcatComponent, EinsumSpec, Padding, RowSpec, RowVar,
    SlotSpec,
};
use super::lexer::Mode;

impl fmt::Display for EinsumSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rhs: Vec<String> = self.rhs.iter().map(slot_text).collect();
        let mut text = String::new();
        for (i, slot) in rhs.iter().enumerate() {
            if i > 0 {
                text.push(';');
            }
            if !slot.is_empty() {
                if i > 0 {
                    text.push(' ');
                }
                text.push_str(slot);
            }
        }
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str("=>");
        let lhs = slot_text(&self.lhs);
        if !lhs.is_empty() {
            text.push(' ');
            text.push_str(&lhs);
        }
        let names = self
            .slots()
            .flat_map(|(_, slot)| slot_names(slot))
            .collect();
        f.write_str(&force_multi_char(text, names))
    }
}

impl fmt::Display for SlotSpec {
    /// The slot as a standalone shape spec.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&force_multi_char(slot_text(self), slot_names(self)))
    }
}

impl fmt::Display for RowSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut items: Vec<String> = self.leading.iter().map(ToString::to_string).collect();
        if let Some(var) = &self.row_var {
            items.push(var.to_string());
        }
        items.extend(self.trailing.iter().map(ToString::to_string));
        f.write_str(&items.join(", "))
    }
}

impl fmt::Display for RowVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowVar::Ellipsis => f.write_str("..."),
            RowVar::Named(name) => write!(f, "..{name}.."),
        }
    }
}

impl fmt::Display for AxisSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxisSpec::Label { name } => f.write_str(name),
            AxisSpec::Anonymous => f.write_char('_'),
            AxisSpec::Fixed { index } => write!(f, "{index}"),
            AxisSpec::Affine(affine) => affine.fmt(f),
            AxisSpec::Concat { components } => {
                for (i, component) in components.iter().enumerate() {
                    if i > 0 {
                        f.write_char('^')?;
                    }
                    match component {
                        ConcatComponent::Label { name } => f.write_str(name)?,
                        ConcatComponent::Size { size } => write!(f, "{size}")?,
                    }
                }
                Ok(())
            }
        }
    }
}

impl fmt::Display for AffineSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some(conv) = &self.conv else {
            // Without a kernel the stride is what makes this an affine axis: always written.
            write!(f, "{}*{}", self.stride, self.over)?;
            if self.offset > 0 {
                write!(f, "+{}", self.offset)?;
            }
            return Ok(());
        };
        if self.stride != Coefficient::Int(1) {
            write!(f, "{}*", self.stride)?;
        }
        f.write_str(&self.over)?;
        match conv.padding {
            Padding::Padded => f.write_str("=+")?,
            Padding::Valid => f.write_str("<+")?,
            Padding::Explicit(explicit) => write!(f, "{explicit}+")?,
            Padding::Unspecified => f.write_str("+")?,
        }
        if self.offset > 0 {
            write!(f, "{}+", self.offset)?;
        }
        if conv.dilation != Coefficient::Int(1) {
            write!(f, "{}*", conv.dilation)?;
        }
        f.write_str(&conv.kernel)
    }
}

impl fmt::Display for Coefficient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Coefficient::Int(n) => write!(f, "{n}"),
            Coefficient::Ident(name) => f.write_str(name),
        }
    }
}

fn slot_text(slot: &SlotSpec) -> String {
    let mut parts = Vec::new();
    if !slot.batch.is_empty_closed() {
        parts.push(slot.batch.to_string());
        parts.push("|".to_owned());
    }
    if !slot.input.is_empty_closed() {
        parts.push(slot.input.to_string());
        parts.push("->".to_owned());
    }
    parts.push(slot.output.to_string());
    parts.retain(|part| !part.is_empty());
    parts.join(" ")
}

/// The names in a slot that single-character mode would read differently.
fn slot_names(slot: &SlotSpec) -> Vec<&str> {
    let mut names = Vec::new();
    for (_, row) in slot.rows() {
        if let Some(RowVar::Named(name)) = &row.row_var {
            names.push(name.as_str());
        }
        for axis in row.axes() {
            if let AxisSpec::Label { name } = axis {
                names.push(name.as_str());
            }
        }
    }
    names
}

fn force_multi_char(mut text: String, names: Vec<&str>) -> String {
    if Mode::of(&text) == Mode::SingleChar && names.iter().any(|name| name.chars().nth(1).is_some())
    {
        text.push(',');
    }
    text
}
