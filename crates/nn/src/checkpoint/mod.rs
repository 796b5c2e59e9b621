//! Checkpoints: tensors' values saved to and loaded from a safetensors file by label, or by the
//! tensor's id in its graph ([`load_by_id`]). This module owns the file format and the checks a
//! load makes before it changes anything; `cells` stores each precision's cells, `header` lays
//! out the file and computes and checks its checksums; files are read and written through
//! [`crate::files`].
//!
//! # Format
//!
//! A safetensors file: the header's length `n` (8 bytes, little-endian), `n` bytes of JSON
//! header (padded with spaces to a multiple of 8), then the tensors' bytes. Each tensor is stored
//! under its label, in its precision's dtype (`u8`, `i8`, `u16`, `i32`, `u32`, `i64`, `u64`,
//! `fp8`, `f16`, `bf16`, `f32`, `f64` as `U8`, `I8`, `U16`, `I32`, `U32`, `I64`, `U64`,
//! `F8_E5M2`, `F16`, `BF16`, `F32`, `F64`; a 128-bit word as four `U32`, along one more axis of
//! 4), with its dims in memory order (batch, output, input);
//! its bytes are little-endian. The header starts with its metadata, and the metadata with the
//! header checksum, so every header begins with
//! `{"__metadata__":{"header checksum":"fnv1a64:` and 16 hex digits: the hash of the file's first
//! `8 + n` bytes (the length and the header) without those 16 digits. The other metadata
//! entries follow, sorted: for each tensor `checksum:<label>` (`fnv1a64:` and, in 16 hex digits,
//! the hash of its bytes followed by the text of its id), `id:<label>` (its id in the graph it
//! was saved from, [`Tensor::id`], in decimal; files saved before ids were recorded lack it, and
//! their checksums hash the bytes alone) and `rows:<label>` (its `batch|input->output` sizes,
//! `2,3|4->5`).
//! The hash is FNV-1a of 64 bits: from `0xcbf29ce484222325`, each byte xored in, then a
//! multiplication by `0x100000001b3`. Tensors' bytes lie widest element first (so each is
//! aligned), by label among equals.
//!
//! # Saving
//!
//! A save writes the whole file beside its destination under a temporary name, flushes it to
//! disk and renames it into place, so a failed save (an error writing, a full disk) leaves what
//! was there and no temporary file. It replaces only a regular file: a symbolic link is followed
//! and the file it points to replaced (keeping its permissions; the link stays a link); a
//! folder, a device, a FIFO, a socket or a link that leads nowhere is refused and left as it is.
//!
//! # Appending
//!
//! [`append`] writes the file again with the tensors added, each replacing the entry of its label,
//! the others' bytes kept; it reads the old file as a load does, and refuses one that fails a
//! check.
//!
//! # Loading by id
//!
//! [`load_by_id`] restores each tensor asked for from the entry recorded under its id, whatever
//! its label is now: a model rebuilt by the same program, whose labels changed or repeat,
//! restores from a checkpoint of the model it rebuilds. A graph numbers its tensors in the order
//! they are made, so the ids match where the program makes the same tensors in the same order;
//! where it does not, dims or precisions that differ are refused, but a tensor of the same
//! shape and precision would take another's values: load by label then. The checks are
//! [`load`]'s, and an id the file lacks, or records twice, is an error naming the tensor.
//!
//! # Loading as new tensors
//!
//! [`load_as_new`] makes a new tensor of every entry, a parameter or a data tensor: its label,
//! rows (from the metadata) and precision (from the dtype) as saved, so that a model loads where
//! the program that built it is not at hand.
//!
//! # What a load checks
//!
//! A load reads a regular file (a symbolic link is followed; a device, a FIFO or a folder is
//! refused), no further than the size it has when opened, then checks, before it sets any
//! value: the safetensors layout (a header's length within the file, JSON, offsets that cover
//! the tensors' bytes exactly up to the file's end), the header checksum, the checksum of every
//! tensor in the file (asked for or not), and for each tensor asked for: present, same dtype,
//! dims and rows. Any failure is an error naming the file (and the tensor), and leaves the
//! context as it was.
//!
//! One flipped bit anywhere in the file is always detected. FNV-1a tells apart any two inputs
//! that differ in one byte (a step `(h ^ b)·p` with `p` odd is a bijection of `b` and of `h`,
//! and so is every later step), and every byte is in the input of a checksum but the header
//! checksum's own digits, which are compared instead: a flip there changes the recorded value.
//! A flip in the header's length makes safetensors read a prefix or an extension of the header,
//! which is JSON only if what it drops or adds is spaces; then the offsets read are the same,
//! and no longer reach the file's end exactly. More flipped bits go unnoticed only if a
//! checksum collides (for a random change, a chance of about 2⁻⁶⁴). A tensor's id is in its
//! checksum as its bytes are, so that an id changed or lost is refused by every load, by label
//! or by id, even behind a header checksum computed again over the change.
//!
//! Safetensors files written by other programs, and checkpoints written before the header
//! checksum, are refused ("no header checksum").
//!
//! Cells pass through the context exactly as stored ([`Context::cells`]), so every precision
//! round-trips bit for bit.

mod cells;
mod header;

use std::collections::BTreeMap;
use std::path::Path;

use rcannl_ir::{Precision, Value};
use rcannl_tensor::{Context, Graph, Tensor, TensorError};
use safetensors::SafeTensors;

use cells::format;
use header::{Entry, checksum, checksum_key, id_key, rows_key};

fn error(message: String) -> TensorError {
    TensorError::new(message)
}

/// The tensors' labels, which must be distinct (and not the name safetensors reserves for its
/// metadata).
fn labels(tensors: &[&Tensor]) -> Result<Vec<String>, String> {
    let labels: Vec<String> = tensors.iter().map(|t| t.label()).collect();
    for (i, label) in labels.iter().enumerate() {
        if label == "__metadata__" {
            return Err("a tensor is labelled '__metadata__', a name safetensors reserves".into());
        }
        if labels[..i].contains(label) {
            return Err(format!(
                "two tensors are labelled '{label}': checkpoints name tensors by label"
            ));
        }
    }
    Ok(labels)
}

/// Rows as `batch|input->output`, the sizes of a row separated by commas.
fn rows_literal(rows: &[Vec<usize>; 3]) -> String {
    let row = |dims: &[usize]| {
        dims.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(",")
    };
    format!("{}|{}->{}", row(&rows[0]), row(&rows[1]), row(&rows[2]))
}

/// Writes `tensors` to `path` by label (labels must be distinct), each in its precision's dtype
/// with its dims in memory order, its rows and a checksum in the metadata, and the header's
/// checksum (see the module doc). The file is written under a temporary name in the same folder,
/// flushed to disk and renamed into place, so a failed save leaves whatever was at `path`
/// before. Only a regular file is replaced: through a symbolic link, the file it points to (the
/// link stays); any other destination (a folder, a device, a FIFO) is refused.
///
/// A tensor holding a value that is not a finite number (NaN, ±∞: a diverged model) is refused,
/// naming it and the cell, and nothing is written, so that a good checkpoint is never replaced
/// by a broken one; [`save_allowing_non_finite`] writes such values when that is meant.
pub fn save(path: &Path, ctx: &mut Context, tensors: &[&Tensor]) -> Result<(), TensorError> {
    save_checked(path, ctx, tensors, true)
}

/// [`save`], writing values that are not finite numbers as they are.
pub fn save_allowing_non_finite(
    path: &Path,
    ctx: &mut Context,
    tensors: &[&Tensor],
) -> Result<(), TensorError> {
    save_checked(path, ctx, tensors, false)
}

/// [`save`], refusing values that are not finite numbers if `finite_only`.
fn save_checked(
    path: &Path,
    ctx: &mut Context,
    tensors: &[&Tensor],
    finite_only: bool,
) -> Result<(), TensorError> {
    let fail = |what: String| error(format!("save checkpoint {}: {what}", path.display()));
    let labels = labels(tensors).map_err(fail)?;
    let (entries, metadata) = entries_of(ctx, tensors, &labels, finite_only).map_err(fail)?;
    let bytes = header::file(&metadata, entries).map_err(fail)?;
    crate::files::replace_file(path, |sink| sink.write_all(&bytes)).map_err(fail)
}

/// The entries of `tensors`, labelled `labels`, and their rows and checksums for the metadata;
/// with `finite_only`, an error for a value that is not a finite number.
fn entries_of<'a>(
    ctx: &mut Context,
    tensors: &[&Tensor],
    labels: &'a [String],
    finite_only: bool,
) -> Result<(Vec<Entry<'a>>, BTreeMap<String, String>), String> {
    let mut entries = Vec::with_capacity(tensors.len());
    let mut metadata = BTreeMap::new();
    for (t, label) in tensors.iter().zip(labels) {
        let format = format(t.precision());
        let in_tensor = |e: TensorError| format!("tensor '{label}': {e}");
        let dims = [ctx.dims(t).map_err(in_tensor)?, format.cell_axes.to_vec()].concat();
        let rows = ctx.rows(t).map_err(in_tensor)?;
        let cells = ctx.cells(t).map_err(in_tensor)?;
        let non_finite = cells
            .iter()
            .enumerate()
            .find(|(_, cell)| matches!(cell, Value::Float(x) if !x.is_finite()));
        if let (true, Some((at, cell))) = (finite_only, non_finite) {
            return Err(format!(
                "tensor '{label}' holds {} at cell {at}: a checkpoint of values that are not \
                 finite numbers is refused (nothing was written); save_allowing_non_finite \
                 writes them",
                cell.as_f64()
            ));
        }
        let mut bytes = Vec::with_capacity(cells.len() * t.precision().size_in_bytes());
        for cell in cells {
            (format.encode)(cell, &mut bytes);
        }
        let id = t.id().to_string();
        metadata.insert(rows_key(label), rows_literal(&rows));
        metadata.insert(checksum_key(label), checksum(&bytes, Some(&id)));
        metadata.insert(id_key(label), id);
        entries.push(Entry {
            label,
            dtype: format.dtype,
            dims,
            bytes,
        });
    }
    Ok((entries, metadata))
}

/// [`save`] into the checkpoint at `path`, keeping the tensors it holds: the file, checked as
/// [`load`] checks it, is written again with `tensors` added, each replacing the entry of its
/// label if there is one (OCANNL's saving with appending). Where there is no file, a [`save`].
/// A failure leaves the file as it was.
pub fn append(path: &Path, ctx: &mut Context, tensors: &[&Tensor]) -> Result<(), TensorError> {
    if !path.exists() {
        return save(path, ctx, tensors);
    }
    let fail = |what: String| error(format!("append to checkpoint {}: {what}", path.display()));
    let labels = labels(tensors).map_err(fail)?;
    let file = Checked::read(path).map_err(fail)?;
    let (mut entries, mut metadata) = entries_of(ctx, tensors, &labels, true).map_err(fail)?;
    let kept: Vec<String> = file
        .names()
        .into_iter()
        .filter(|name| !labels.contains(name))
        .collect();
    for name in &kept {
        let (info, bytes) = file.entry(name).map_err(fail)?;
        for key in [rows_key(name), checksum_key(name), id_key(name)] {
            if let Some(value) = file.notes.get(&key) {
                metadata.insert(key, value.clone());
            }
        }
        entries.push(Entry {
            label: name,
            dtype: info.dtype,
            dims: info.shape.clone(),
            bytes: bytes.to_vec(),
        });
    }
    let bytes = header::file(&metadata, entries).map_err(fail)?;
    crate::files::replace_file(path, |sink| sink.write_all(&bytes)).map_err(fail)
}

/// A checkpoint read and checked (see the module doc): its bytes, the header's length, what the
/// header says of each tensor, and its metadata.
struct Checked {
    file: Vec<u8>,
    header_length: usize,
    contents: safetensors::tensor::Metadata,
    notes: std::collections::HashMap<String, String>,
}

impl Checked {
    /// The checkpoint at `path`, once its layout, its header checksum and the checksum of every
    /// tensor in it are checked.
    fn read(path: &Path) -> Result<Checked, String> {
        let file = crate::files::read_regular(path)?;
        header::check_length(&file)?;
        let (n, contents) = SafeTensors::read_metadata(&file).map_err(|e| {
            format!("not a readable safetensors file ({e}): truncated or corrupted?")
        })?;
        header::check_header(&file, n)?;
        let notes = contents.metadata().clone().unwrap_or_default();
        let checked = Checked {
            file,
            header_length: n,
            contents,
            notes,
        };
        for name in checked.contents.offset_keys() {
            let bytes = checked.bytes_of(&name).unwrap_or_default();
            let Some(saved) = checked.notes.get(&checksum_key(&name)) else {
                return Err(format!(
                    "tensor '{name}' has no checksum: the file is corrupted"
                ));
            };
            let id = checked.notes.get(&id_key(&name)).map(String::as_str);
            let computed = checksum(bytes, id);
            if *saved != computed {
                let what = if id.is_some() {
                    "bytes and id"
                } else {
                    "bytes"
                };
                return Err(format!(
                    "tensor '{name}' has {what} whose checksum {computed} does not match the \
                     recorded {saved}: the file is corrupted"
                ));
            }
            if let Some(id) = id.filter(|id| id.parse::<usize>().is_err()) {
                return Err(format!(
                    "tensor '{name}' has the id '{id}' recorded, which is not a number: the \
                     file is corrupted"
                ));
            }
        }
        Ok(checked)
    }

    /// The bytes of the tensor `name`, which the offsets cover exactly (`read_metadata` checked).
    fn bytes_of(&self, name: &str) -> Option<&[u8]> {
        let (start, end) = self.contents.info(name)?.data_offsets;
        self.file[8 + self.header_length..].get(start..end)
    }

    /// The names of its tensors, sorted.
    fn names(&self) -> Vec<String> {
        let mut names = self.contents.offset_keys();
        names.sort();
        names
    }

    /// What the header says of the tensor `name`, and its bytes.
    fn entry(&self, name: &str) -> Result<(&safetensors::tensor::TensorInfo, &[u8]), String> {
        let info = self.contents.info(name).ok_or_else(|| {
            format!(
                "no tensor '{name}' in the file (it holds {})",
                names(&self.contents)
            )
        })?;
        Ok((info, self.bytes_of(name).unwrap_or_default()))
    }

    /// The entries recorded under each id, by id (entries saved before ids were recorded have
    /// none; [`Checked::read`] refused an id that is not a number).
    fn ids(&self) -> BTreeMap<usize, Vec<String>> {
        let mut ids: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for name in self.names() {
            let id = self
                .notes
                .get(&id_key(&name))
                .and_then(|id| id.parse().ok());
            if let Some(id) = id {
                ids.entry(id).or_default().push(name);
            }
        }
        ids
    }

    /// The cells of the entry `name` for `t`, once its dtype, dims and rows are checked against
    /// those `t` has in `ctx`; `what` names the tensor in a message.
    fn cells_for(
        &self,
        ctx: &mut Context,
        t: &Tensor,
        name: &str,
        what: &str,
    ) -> Result<Vec<Value>, String> {
        let format = format(t.precision());
        let (info, bytes) = self.entry(name)?;
        let in_tensor = |e: TensorError| format!("{what}: {e}");
        let dims = [ctx.dims(t).map_err(in_tensor)?, format.cell_axes.to_vec()].concat();
        let rows = rows_literal(&ctx.rows(t).map_err(in_tensor)?);
        let saved_rows = self.rows(name)?;
        if info.dtype != format.dtype {
            return Err(format!(
                "{what} is {} of dims {:?} (rows {saved_rows}) in the file, {} of dims {dims:?} \
                 (rows {rows}) in memory (precision {})",
                info.dtype,
                info.shape,
                format.dtype,
                t.precision()
            ));
        }
        if info.shape != dims || saved_rows != rows {
            return Err(format!(
                "{what} has dims {:?} (rows {saved_rows}) in the file, dims {dims:?} (rows \
                 {rows}) in memory",
                info.shape
            ));
        }
        let size = t.precision().size_in_bytes();
        Ok(bytes.chunks_exact(size).map(format.decode).collect())
    }

    /// The rows recorded for the tensor `name`.
    fn rows(&self, name: &str) -> Result<&str, String> {
        self.notes
            .get(&rows_key(name))
            .map(String::as_str)
            .ok_or_else(|| format!("tensor '{name}' has no rows recorded: the file is corrupted"))
    }
}

/// The names of the tensors `contents` holds, quoted and sorted, for a message.
fn names(contents: &safetensors::tensor::Metadata) -> String {
    let mut names = contents.offset_keys();
    if names.is_empty() {
        return "none".to_owned();
    }
    names.sort();
    names
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads the checkpoint at `path` and sets each tensor's values from the entry of its label,
/// after checking the file and every tensor (see the module doc): the header checksum, the
/// checksum of every tensor in the file, and for each tensor asked for an entry with its dtype,
/// dims and rows. Any failure (an unreadable, truncated or corrupted file, a missing label, a
/// mismatch) is an error naming the file and the tensor, and changes nothing in `ctx`. Entries of
/// the file that no tensor asks for are checked, not loaded.
///
/// Load after [`Context::init_params`]: initialization sets parameters that were not
/// initialized yet, over whatever was loaded into them.
pub fn load(path: &Path, ctx: &mut Context, tensors: &[&Tensor]) -> Result<(), TensorError> {
    let fail = |what: String| error(format!("load checkpoint {}: {what}", path.display()));
    let labels = labels(tensors).map_err(fail)?;
    let file = Checked::read(path).map_err(fail)?;
    let mut loaded = Vec::with_capacity(tensors.len());
    for (t, label) in tensors.iter().zip(&labels) {
        let cells = file
            .cells_for(ctx, t, label, &format!("tensor '{label}'"))
            .map_err(fail)?;
        loaded.push((*t, cells));
    }
    set_all(ctx, loaded).map_err(fail)
}

/// Sets each tensor's cells, all of them checked already.
fn set_all(ctx: &mut Context, loaded: Vec<(&Tensor, Vec<Value>)>) -> Result<(), String> {
    for (t, cells) in loaded {
        ctx.set_cells(t, &cells)
            .map_err(|e| format!("tensor '{}': {e}", t.label()))?;
    }
    Ok(())
}

/// Reads the checkpoint at `path` and sets each tensor's values from the entry recorded under
/// its id ([`Tensor::id`]), whatever the tensor's label is now and whatever it was saved as:
/// a model rebuilt by the same program restores from a checkpoint of the model it rebuilds,
/// though its labels changed or repeat (see the module doc on when ids match). The file and
/// every tensor are checked as [`load`] checks them: the header checksum, the checksum of every
/// tensor in the file, and for each tensor asked for an entry of its id with its dtype, dims and
/// rows. An id the file lacks, or records for two entries (appended from two graphs), a tensor
/// asked for twice, and a file saved before ids were recorded are errors too; each names the
/// file and the tensor by its label and id (and the label it was saved as), and changes nothing
/// in `ctx`. Entries that no tensor asks for are checked, not loaded.
///
/// Load after [`Context::init_params`]: initialization sets parameters that were not
/// initialized yet, over whatever was loaded into them.
///
/// A model saved under one set of labels restores into the same model built under others:
///
/// ```
/// use rcannl_nn::blocks::Dense;
/// use rcannl_nn::checkpoint::{load_by_id, save};
/// use rcannl_tensor::{Context, Graph, Tensor};
///
/// // Two layers, labelled after `names`: the same tensors in the same order whatever the names.
/// fn model(graph: &Graph, names: [&str; 2]) -> (Tensor, Vec<Tensor>) {
///     let x = graph.data("x").shape("2|->3").values(vec![1., 2., 3., 4., 5., 6.]).build();
///     let (first, second) = (Dense::new(graph, names[0], 4), Dense::new(graph, names[1], 2));
///     let y = second.apply(&first.apply(&x).relu());
///     (y, [first.params(), second.params()].concat())
/// }
///
/// let path = std::env::temp_dir().join("rcannl-load-by-id-example.safetensors");
/// let graph = Graph::new();
/// let (y, params) = model(&graph, ["encoder", "head"]);
/// let mut ctx = Context::new(&graph);
/// ctx.init_params()?;
/// save(&path, &mut ctx, &params.iter().collect::<Vec<_>>())?;
///
/// // Rebuilt with both layers labelled alike: loading by label cannot tell their tensors apart.
/// let rebuilt = Graph::new();
/// let (y2, params2) = model(&rebuilt, ["layer", "layer"]);
/// let mut ctx2 = Context::new(&rebuilt);
/// ctx2.set_seed(7);
/// ctx2.init_params()?;
/// load_by_id(&path, &mut ctx2, &params2.iter().collect::<Vec<_>>())?;
/// for (p, p2) in params.iter().zip(&params2) {
///     assert_eq!((p.id(), ctx.values(p)?), (p2.id(), ctx2.values(p2)?));
/// }
/// let (f, f2) = (ctx.forward(&[&y])?, ctx2.forward(&[&y2])?);
/// ctx.run(&f)?;
/// ctx2.run(&f2)?;
/// assert_eq!(ctx.values(&y)?, ctx2.values(&y2)?);
/// # std::fs::remove_file(&path).ok();
/// # Ok::<(), rcannl_tensor::TensorError>(())
/// ```
pub fn load_by_id(path: &Path, ctx: &mut Context, tensors: &[&Tensor]) -> Result<(), TensorError> {
    let fail = |what: String| error(format!("load checkpoint {} by id: {what}", path.display()));
    let file = Checked::read(path).map_err(fail)?;
    let ids = file.ids();
    if ids.is_empty() && !file.names().is_empty() {
        return Err(fail(
            "the file records no tensor ids (it was saved before checkpoints recorded them): \
             load it by label (checkpoint::load)"
                .to_owned(),
        ));
    }
    let mut loaded = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        let (id, label) = (t.id(), t.label());
        if tensors[..i].contains(t) {
            return Err(fail(format!(
                "tensor '{label}' (id {id}) is asked for twice"
            )));
        }
        let name = match ids.get(&id).map(Vec::as_slice) {
            Some([name]) => name,
            Some(names) => {
                let names: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
                return Err(fail(format!(
                    "tensor '{label}' (id {id}): the file records id {id} for {} (tensors \
                     appended from different graphs): load them by label",
                    names.join(" and ")
                )));
            }
            None => {
                return Err(fail(format!(
                    "tensor '{label}' (id {id}): no tensor of id {id} in the file (it records {})",
                    recorded(&ids)
                )));
            }
        };
        let what = if *name == label {
            format!("tensor '{label}' (id {id})")
        } else {
            format!("tensor '{label}' (id {id}, saved as '{name}')")
        };
        loaded.push((*t, file.cells_for(ctx, t, name, &what).map_err(fail)?));
    }
    set_all(ctx, loaded).map_err(fail)
}

/// The most entries a message lists.
const LISTED: usize = 12;

/// The ids `ids` records, each with its entries, in order of id, for a message (the first
/// [`LISTED`] of them).
fn recorded(ids: &BTreeMap<usize, Vec<String>>) -> String {
    if ids.is_empty() {
        return "no ids".to_owned();
    }
    let mut listed: Vec<String> = ids
        .iter()
        .flat_map(|(id, names)| names.iter().map(move |n| format!("id {id} for '{n}'")))
        .collect();
    let more = listed.len().saturating_sub(LISTED);
    listed.truncate(LISTED);
    if more > 0 {
        listed.push(format!("{more} more"));
    }
    listed.join(", ")
}

/// What [`load_as_new`] makes of each tensor of a checkpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NewTensors {
    /// Parameters starting from the saved values (`Init::Values`): a model to train on.
    Params,
    /// Data tensors holding the saved values: constants to compute with.
    Data,
}

/// Every tensor of the checkpoint at `path` as a new tensor of `graph`, sorted by label: each
/// labelled as saved, of its saved rows and precision, holding its saved values (a parameter
/// once `Context::init_params` has run), so that a model is loaded without the program that
/// built it. The file is checked as [`load`] checks it. A precision whose values a new tensor
/// cannot be given (128-bit random words, 64-bit integers beyond 2⁵³) is an error naming the
/// tensor, and then no tensor is made.
pub fn load_as_new(
    path: &Path,
    graph: &Graph,
    kind: NewTensors,
) -> Result<Vec<Tensor>, TensorError> {
    let fail = |what: String| error(format!("load checkpoint {}: {what}", path.display()));
    let file = Checked::read(path).map_err(fail)?;
    let mut leaves = Vec::new();
    for name in file.names() {
        let (info, bytes) = file.entry(&name).map_err(fail)?;
        let in_tensor = |what: String| fail(format!("tensor '{name}': {what}"));
        let precision = Precision::ALL
            .into_iter()
            .find(|&p| format(p).dtype == info.dtype && format(p).cell_axes.is_empty())
            .ok_or_else(|| in_tensor(format!("{} cells make no tensor", info.dtype)))?;
        let values: Vec<f64> = bytes
            .chunks_exact(precision.size_in_bytes())
            .map(|cell| exact_f64((format(precision).decode)(cell), precision))
            .collect::<Option<_>>()
            .ok_or_else(|| in_tensor(format!("{precision} values beyond 2^53 make no tensor")))?;
        leaves.push((
            name.clone(),
            precision,
            file.rows(&name).map_err(fail)?.to_owned(),
            values,
        ));
    }
    Ok(leaves
        .into_iter()
        .map(|(label, precision, rows, values)| {
            let leaf = match kind {
                NewTensors::Params => graph.param(&label),
                NewTensors::Data => graph.data(&label),
            };
            leaf.shape(&rows)
                .precision(precision)
                .values(values)
                .build()
        })
        .collect())
}

/// `value` as an `f64` that holds it exactly.
fn exact_f64(value: Value, precision: Precision) -> Option<f64> {
    match value {
        Value::Float(x) => Some(x),
        // A u64 from 2^63 up, whose bits read as a negative i64, is beyond 2^53 too.
        Value::Int(i) if precision == Precision::U64 && i < 0 => None,
        Value::Int(i) => {
            let x = i as f64;
            (x as i64 == i && x.abs() <= 2f64.powi(53)).then_some(x)
        }
        _ => None,
    }
}

/// What a model's evaluation reads besides its data: every parameter of `graph`, then its state
/// (`Graph::state_tensors`: batch normalization's running statistics), as PyTorch's
/// `state_dict` holds parameters and buffers.
fn model(graph: &Graph) -> Vec<Tensor> {
    let mut tensors = graph.params();
    tensors.extend(graph.state_tensors());
    tensors
}

/// [`save`] of the model `graph` holds: every parameter and the model's state (batch
/// normalization's running statistics), so that a model loaded from it evaluates as the saved
/// one did.
pub fn save_params(path: &Path, ctx: &mut Context, graph: &Graph) -> Result<(), TensorError> {
    let tensors = model(graph);
    save(path, ctx, &tensors.iter().collect::<Vec<_>>())
}

/// [`load`] of the model `graph` holds: every parameter and the model's state, as
/// [`save_params`] saves them (a file lacking any of them is refused, naming it).
pub fn load_params(path: &Path, ctx: &mut Context, graph: &Graph) -> Result<(), TensorError> {
    let tensors = model(graph);
    load(path, ctx, &tensors.iter().collect::<Vec<_>>())
}

/// [`load_by_id`] of the model `graph` holds: every parameter and the model's state, each from
/// the entry of its id in a checkpoint [`save_params`] wrote for the model `graph` rebuilds
/// (a file lacking any of them is refused, naming it).
pub fn load_params_by_id(path: &Path, ctx: &mut Context, graph: &Graph) -> Result<(), TensorError> {
    let tensors = model(graph);
    load_by_id(path, ctx, &tensors.iter().collect::<Vec<_>>())
}
