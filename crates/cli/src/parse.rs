//! `rcannl parse SPEC [--json]`: parse an einsum or shape spec and show its structure.
//!
//! The parsed tree is first turned into a *view* ([`SpecView`]): plain data with the names the
//! output uses (slot roles, resolved row-variable names, lexical mode). Both renderers read the view:
//! [`render_text`] draws an indented tree for people, and the view's `Serialize` impl is the `--json`
//! format, so the two can't drift apart. The JSON layout is defined here rather than borrowed from
//! the AST's own serde derive, so the AST can change without silently changing this output.

use std::io;
use std::process::ExitCode;

use rcannl_shape::spec::{
    AffineSpec, AxisSpec, Coefficient, ConcatComponent, EinsumSpec, Kind, Mode, Padding, RowSpec,
    RowVar, SlotRole, SlotSpec, SpecError, parse_einsum, parse_shape_spec,
};
use serde::Serialize;

use crate::report::write_out;

/// Arguments of `rcannl parse`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The spec to parse: an einsum spec if it contains `=>` or `;` (e.g. "ij;jk=>ik"), otherwise
    /// a shape spec (e.g. "b | i -> o" or "2*o<+3*k, c").
    #[arg(value_name = "SPEC", allow_hyphen_values = true)]
    pub spec: String,

    /// Print one JSON object on stdout instead of the readable tree (errors too, as
    /// {"error": {...}}).
    #[arg(long)]
    pub json: bool,
}

/// Runs the command: exit status 0 when the spec parses, 1 when it does not.
pub fn run(args: &Args) -> ExitCode {
    match parse(&args.spec) {
        Ok(parsed) => {
            let view = SpecView::new(&args.spec, &parsed);
            let output = if args.json {
                match to_json_line(&view) {
                    Ok(line) => line,
                    Err(code) => return code,
                }
            } else {
                render_text(&view)
            };
            write_out(io::stdout(), &output)
        }
        Err(err) => {
            if args.json {
                let report = ErrorReport {
                    error: ErrorBody {
                        kind: "parse",
                        message: err.to_string(),
                        column: err.column,
                    },
                };
                if let Ok(line) = to_json_line(&report) {
                    write_out(io::stdout(), &line);
                }
            } else {
                write_out(io::stderr(), &format!("error: {err}\n"));
            }
            ExitCode::from(1)
        }
    }
}

/// What the text parsed to.
#[derive(Debug)]
enum Parsed {
    Einsum(EinsumSpec),
    Shape(SlotSpec),
}

/// Parses `text` as an einsum spec when it contains `=>` or `;`, and as a shape spec otherwise.
fn parse(text: &str) -> Result<Parsed, SpecError> {
    if text.contains("=>") || text.contains(';') {
        parse_einsum(text).map(Parsed::Einsum)
    } else {
        parse_shape_spec(text).map(Parsed::Shape)
    }
}

// ---------------------------------------------------------------------------------------------
// The view: what both renderers show. Field order is the JSON key order.

/// A parsed spec, ready to render.
#[derive(Debug, Serialize)]
struct SpecView {
    /// The text as given.
    spec: String,
    canonical: String,
    /// `"single-char"` or `"multi-char"`.
    mode: &'static str,
    kind: SpecKind,
    slots: Vec<SlotView>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum SpecKind {
    Einsum,
    Shape,
}

#[derive(Debug, Serialize)]
struct SlotView {
    /// `rhs1`, `rhs2`, …, `lhs`, or `shape`.
    role: String,
    /// The slot's own canonical text (not part of the JSON: `canonical` has the whole spec).
    #[serde(skip)]
    text: String,
    batch: RowView,
    input: RowView,
    output: RowView,
}

#[derive(Debug, Serialize)]
struct RowView {
    /// No row variable: the row has exactly the axes written.
    closed: bool,
    leading: Vec<AxisView>,
    row_var: Option<RowVarView>,
    trailing: Vec<AxisView>,
}

#[derive(Debug, Serialize)]
struct RowVarView {
    form: RowVarForm,
    /// The variable's name; for `...` the name of the row's kind.
    name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum RowVarForm {
    /// `...`
    Ellipsis,
    /// `..name..`
    Named,
}

#[derive(Debug, Serialize)]
struct AxisView {
    /// The axis as the canonical form writes it (not part of the JSON).
    #[serde(skip)]
    text: String,
    /// The tree's own serialization: an `"axis"` tag and the axis's fields.
    #[serde(flatten)]
    axis: AxisSpec,
}

impl SpecView {
    fn new(text: &str, parsed: &Parsed) -> Self {
        let (canonical, kind, slots) = match parsed {
            Parsed::Einsum(spec) => (
                spec.to_string(),
                SpecKind::Einsum,
                spec.slots()
                    .map(|(role, slot)| SlotView::new(role, slot))
                    .collect(),
            ),
            Parsed::Shape(slot) => (
                slot.to_string(),
                SpecKind::Shape,
                vec![SlotView::new(SlotRole::Shape, slot)],
            ),
        };
        SpecView {
            spec: text.to_owned(),
            canonical,
            mode: Mode::of(text).describe(),
            kind,
            slots,
        }
    }

    /// The number of operands of an einsum spec: every slot but the result.
    fn operands(&self) -> usize {
        self.slots.len().saturating_sub(1)
    }
}

impl SlotView {
    fn new(role: SlotRole, slot: &SlotSpec) -> Self {
        SlotView {
            role: role.to_string(),
            text: slot.to_string(),
            batch: RowView::new(Kind::Batch, &slot.batch),
            input: RowView::new(Kind::Input, &slot.input),
            output: RowView::new(Kind::Output, &slot.output),
        }
    }

    fn rows(&self) -> [(Kind, &RowView); 3] {
        [
            (Kind::Batch, &self.batch),
            (Kind::Input, &self.input),
            (Kind::Output, &self.output),
        ]
    }
}

impl RowView {
    fn new(kind: Kind, row: &RowSpec) -> Self {
        RowView {
            closed: row.row_var.is_none(),
            leading: row.leading.iter().map(AxisView::new).collect(),
            row_var: row.row_var.as_ref().map(|var| RowVarView {
                form: match var {
                    RowVar::Ellipsis => RowVarForm::Ellipsis,
                    RowVar::Named(_) => RowVarForm::Named,
                },
                name: var.name_in(kind).to_owned(),
            }),
            trailing: row.trailing.iter().map(AxisView::new).collect(),
        }
    }

    fn axis_count(&self) -> usize {
        self.leading.len() + self.trailing.len()
    }
}

impl AxisView {
    fn new(axis: &AxisSpec) -> Self {
        AxisView {
            text: axis.to_string(),
            axis: axis.clone(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The JSON renderer.

#[derive(Debug, Serialize)]
struct ErrorReport {
    error: ErrorBody,
}

#[derive(Debug, Serialize)]
struct ErrorBody {
    kind: &'static str,
    /// The caret-rendered message, as the human renderer prints it.
    message: String,
    /// 1-based character column, when the error has one.
    column: Option<usize>,
}

/// `value` as one line of JSON; an error (which the view types cannot produce) is reported on
/// stderr and becomes the exit code.
fn to_json_line(value: &impl Serialize) -> Result<String, ExitCode> {
    match serde_json::to_string(value) {
        Ok(mut line) => {
            line.push('\n');
            Ok(line)
        }
        Err(err) => {
            write_out(
                io::stderr(),
                &format!("error: could not write JSON: {err}\n"),
            );
            Err(ExitCode::from(1))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The human renderer.

/// Column width of the row names (`output:` plus a space).
const ROW_NAME_WIDTH: usize = 8;
/// Column width of the flank names in an open row (`trailing:` plus a space).
const FLANK_NAME_WIDTH: usize = 10;
/// The widest axis text that descriptions are aligned after. A longer axis is followed directly
/// by its description: padding every line to the longest axis (and indenting a concatenation's
/// component lines under it) would make the output grow with the square of the spec.
const MAX_ALIGNED_WIDTH: usize = 24;

/// The readable tree: a summary, then each slot with its three rows and their axes.
///
/// ```text
/// canonical: 2*o<+3*k, c
/// mode:      multi-char
/// kind:      shape
///
/// shape: 2*o<+3*k, c
///   batch:  (none)
///   input:  (none)
///   output: closed, 2 axes
///     2*o<+3*k  affine: stride 2 over o, kernel k, dilation 3, offset 0, padding valid
///     c         label c
/// ```
///
/// An open row lists its flanks and row variable in writing order:
///
/// ```text
///   output: open
///     leading:  x    label x
///     row var:  ...  row variable 'output'
///     trailing: (none)
/// ```
fn render_text(view: &SpecView) -> String {
    let mut out = String::new();
    let kind = match view.kind {
        SpecKind::Einsum => {
            let n = view.operands();
            format!("einsum, {n} operand{}", plural(n))
        }
        SpecKind::Shape => "shape".to_owned(),
    };
    let canonical = if view.canonical.is_empty() {
        "(empty)"
    } else {
        &view.canonical
    };
    out += &format!("canonical: {canonical}\n");
    out += &format!("mode:      {}\n", view.mode);
    out += &format!("kind:      {kind}\n");
    for slot in &view.slots {
        out.push('\n');
        let text = if slot.text.is_empty() {
            "(empty)"
        } else {
            &slot.text
        };
        out += &format!("{}: {text}\n", slot.role);
        for (kind, row) in slot.rows() {
            render_row(&mut out, kind, row);
        }
    }
    out
}

fn render_row(out: &mut String, kind: Kind, row: &RowView) {
    let name = format!("{kind}:");
    out.push_str(&format!("  {name:<ROW_NAME_WIDTH$}"));
    let Some(var) = &row.row_var else {
        let n = row.axis_count();
        if n == 0 {
            out.push_str("(none)\n");
            return;
        }
        let noun = if n == 1 { "axis" } else { "axes" };
        out.push_str(&format!("closed, {n} {noun}\n"));
        // A closed row is all trailing flank (the parser keeps its leading flank empty).
        let axes: Vec<&AxisView> = row.leading.iter().chain(&row.trailing).collect();
        let width = aligned_width(axes.iter().map(|axis| width_of(&axis.text)));
        let indent = " ".repeat(4);
        for axis in axes {
            render_axis(out, &indent, &indent, width, axis);
        }
        return;
    };
    out.push_str("open\n");
    let var_text = match var.form {
        RowVarForm::Ellipsis => "...".to_owned(),
        RowVarForm::Named => format!("..{}..", var.name),
    };
    let width = aligned_width(
        row.leading
            .iter()
            .chain(&row.trailing)
            .map(|axis| width_of(&axis.text))
            .chain([width_of(&var_text)]),
    );
    render_flank(out, "leading:", &row.leading, width);
    out.push_str(&format!(
        "    {:<FLANK_NAME_WIDTH$}{var_text:<width$}  row variable '{}'\n",
        "row var:", var.name
    ));
    render_flank(out, "trailing:", &row.trailing, width);
}

/// The column width axis texts are padded to: the widest of `widths`, up to
/// [`MAX_ALIGNED_WIDTH`].
fn aligned_width(widths: impl Iterator<Item = usize>) -> usize {
    widths.max().unwrap_or(0).min(MAX_ALIGNED_WIDTH)
}

/// One flank of an open row: its name, then its axes one per line (or `(none)`).
fn render_flank(out: &mut String, name: &str, axes: &[AxisView], width: usize) {
    let first = format!("    {name:<FLANK_NAME_WIDTH$}");
    if axes.is_empty() {
        out.push_str(&format!("{first}(none)\n"));
        return;
    }
    let rest = " ".repeat(first.len());
    for (i, axis) in axes.iter().enumerate() {
        render_axis(out, if i == 0 { &first } else { &rest }, &rest, width, axis);
    }
}

/// One axis line, `prefix`, the axis text padded to `width`, and its description; a concatenation
/// is followed by one line per component under the description.
fn render_axis(out: &mut String, prefix: &str, indent: &str, width: usize, axis: &AxisView) {
    out.push_str(&format!(
        "{prefix}{}{}  {}\n",
        axis.text,
        " ".repeat(width.saturating_sub(width_of(&axis.text))),
        describe_axis(&axis.axis)
    ));
    if let AxisSpec::Concat { components } = &axis.axis {
        let under = format!("{indent}{}    ", " ".repeat(width));
        for component in components {
            out.push_str(&format!("{under}{}\n", describe_component(component)));
        }
    }
}

fn describe_axis(axis: &AxisSpec) -> String {
    match axis {
        AxisSpec::Label { name } => format!("label {name}"),
        AxisSpec::Anonymous => "anonymous _".to_owned(),
        AxisSpec::Fixed { index } => format!("fixed {index}"),
        AxisSpec::Affine(AffineSpec {
            stride,
            over,
            offset,
            conv,
        }) => {
            let stride = format!("stride {} over {over}", describe_coefficient(stride));
            match conv {
                None => format!("affine: {stride}, no kernel, offset {offset}"),
                Some(conv) => format!(
                    "affine: {stride}, kernel {}, dilation {}, offset {offset}, padding {}",
                    conv.kernel,
                    describe_coefficient(&conv.dilation),
                    match conv.padding {
                        Padding::Valid => "valid".to_owned(),
                        Padding::Padded => "padded".to_owned(),
                        Padding::Explicit(explicit) => format!(
                            "{} before, {} after, output rounded {}",
                            explicit.before,
                            explicit.after,
                            if explicit.ceil { "up" } else { "down" }
                        ),
                        Padding::Unspecified => "unspecified".to_owned(),
                    }
                ),
            }
        }
        AxisSpec::Concat { components } => {
            let parts: Vec<String> = components.iter().map(component_text).collect();
            format!("concat: {}", parts.join(" ^ "))
        }
    }
}

/// `"2"`, or `"s (unbound identifier)"`.
fn describe_coefficient(coefficient: &Coefficient) -> String {
    match coefficient {
        Coefficient::Int(n) => n.to_string(),
        Coefficient::Ident(name) => format!("{name} (unbound identifier)"),
    }
}

fn component_text(component: &ConcatComponent) -> String {
    match component {
        ConcatComponent::Label { name } => name.clone(),
        ConcatComponent::Size { size } => size.to_string(),
    }
}

fn describe_component(component: &ConcatComponent) -> String {
    match component {
        ConcatComponent::Label { name } => format!("label {name}"),
        ConcatComponent::Size { size } => format!("size {size}"),
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

/// Display width of spec text, which the lexer limits to ASCII outside of error messages.
fn width_of(text: &str) -> usize {
    text.chars().count()
}
