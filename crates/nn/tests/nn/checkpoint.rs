//! Checkpoints: training resumed from a checkpoint goes on exactly as it would have; every
//! savable precision round-trips bit for bit; bad files and mismatched models are refused with
//! errors naming what is wrong, and change nothing in memory.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, PoisonError};

use rcannl_ir::Precision;
use rcannl_ir::Value;
use rcannl_nn::blocks::Mlp;
use rcannl_nn::checkpoint::{
    NewTensors, append, load, load_as_new, load_params, save, save_params,
};
use rcannl_nn::loss::mean;
use rcannl_tensor::{Context, Formula, Graph, Tensor, TensorError, Update};

/// The tests here compile the same routines, and the C backend builds a routine under a name of
/// the process's, so two threads building one at once (on a cold cache) can race: they take turns.
pub(crate) fn one_at_a_time() -> MutexGuard<'static, ()> {
    static TURN: Mutex<()> = Mutex::new(());
    TURN.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A fresh, empty folder for one test.
pub(crate) fn folder(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("checkpoint-{test}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("a test folder");
    dir
}

/// An MLP of `widths` on data of shape `4|->5`, with a mean squared error against fixed targets
/// of the last width.
struct Model {
    graph: Graph,
    loss: Tensor,
    params: Vec<Tensor>,
}

fn model(widths: &[usize]) -> Model {
    let graph = Graph::new();
    let outputs = widths[widths.len() - 1];
    let x = graph
        .data("x")
        .shape("4|->5")
        .values(
            (0..20)
                .map(|i| f64::from((i * 7) % 11) / 5.0 - 1.0)
                .collect(),
        )
        .build();
    let target = graph
        .data("target")
        .shape(&format!("4|->{outputs}"))
        .values(
            (0..4 * outputs)
                .map(|i| f64::from((i % 3) as u8) - 1.0)
                .collect(),
        )
        .build();
    let mlp = Mlp::new(&graph, "mlp", widths);
    let error = &mlp.apply(&x) - &target;
    let loss = mean(&error.pmul(&error));
    Model {
        params: mlp.params(),
        graph,
        loss,
    }
}

/// Velocity tensors for SGD with momentum, labelled as `optim::Sgd` labels its own (which it keeps
/// to itself), shaped like their parameters once `ctx` has inferred them; and the step
/// `v ← 0.9·v + g`, `w ← w − 0.05·v`.
fn momentum(
    ctx: &mut Context,
    params: &[Tensor],
) -> Result<(Vec<Tensor>, Vec<Update>), TensorError> {
    let mut velocities = Vec::new();
    let mut updates = Vec::new();
    for w in params {
        let [batch, input, output] = ctx.rows(w)?;
        let row = |dims: &[usize]| {
            dims.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let v = w
            .graph()
            .data(&format!("{} velocity", w.label()))
            .shape(&format!(
                "{}|{}->{}",
                row(&batch),
                row(&input),
                row(&output)
            ))
            .values(vec![0.0; ctx.dims(w)?.iter().product()])
            .build();
        updates.push(Update::set(&v, 0.9 * Formula::value(&v) + Formula::grad(w)));
        updates.push(Update::subtract(w, 0.05 * Formula::value(&v)));
        velocities.push(v);
    }
    Ok((velocities, updates))
}

/// The bits of every cell of every tensor.
pub(crate) fn bits(ctx: &Context, tensors: &[&Tensor]) -> Vec<Vec<u64>> {
    tensors
        .iter()
        .map(|t| {
            ctx.values(t)
                .expect("values")
                .iter()
                .map(|x| x.to_bits())
                .collect()
        })
        .collect()
}

pub(crate) fn loss_bits(ctx: &Context, loss: &Tensor) -> u64 {
    ctx.values(loss).expect("the loss")[0].to_bits()
}

/// A model trained three steps from seed 1, its parameters and velocities, and the checkpoint of
/// both at `path`.
struct Trained {
    model: Model,
    ctx: Context,
    velocities: Vec<Tensor>,
    updates: Vec<Update>,
}

impl Trained {
    fn state(&self) -> Vec<&Tensor> {
        self.model.params.iter().chain(&self.velocities).collect()
    }
}

fn trained(path: &Path) -> Trained {
    let model = model(&[8, 3]);
    let mut ctx = Context::new(&model.graph);
    ctx.set_seed(1);
    ctx.init_params().expect("init");
    let (velocities, updates) = momentum(&mut ctx, &model.params).expect("velocities");
    let backprop = ctx.backprop(&model.loss).expect("backprop");
    let step = ctx.update(&updates).expect("step");
    for _ in 0..3 {
        ctx.run(&backprop).expect("backprop runs");
        ctx.run(&step).expect("step runs");
    }
    let mut trained = Trained {
        model,
        ctx,
        velocities,
        updates,
    };
    let state: Vec<Tensor> = trained.state().into_iter().cloned().collect();
    save(path, &mut trained.ctx, &state.iter().collect::<Vec<_>>()).expect("save");
    trained
}

/// A second context of the trained model's graph, initialized from seed 2 with its routines
/// compiled: its parameters differ from the trained ones, its velocities are zero.
fn fresh(trained: &Trained) -> Context {
    let mut ctx = Context::new(&trained.model.graph);
    ctx.set_seed(2);
    ctx.init_params().expect("init");
    ctx.backprop(&trained.model.loss).expect("backprop");
    ctx.update(&trained.updates).expect("step");
    ctx
}

#[test]
fn training_resumed_from_a_checkpoint_goes_on_exactly() {
    let _turn = one_at_a_time();
    let path = folder("resume").join("model.safetensors");
    let mut trained = trained(&path);
    let state: Vec<Tensor> = trained.state().into_iter().cloned().collect();
    let state: Vec<&Tensor> = state.iter().collect();

    let mut resumed = fresh(&trained);
    assert_ne!(bits(&resumed, &state), bits(&trained.ctx, &state));
    load(&path, &mut resumed, &state).expect("load");
    assert_eq!(bits(&resumed, &state), bits(&trained.ctx, &state));

    // Two more steps in both: the first's loss depends on the parameters, the second's on the
    // velocities too.
    let loss = trained.model.loss.clone();
    let routines = |ctx: &mut Context| {
        (
            ctx.backprop(&loss).expect("backprop"),
            ctx.update(&trained.updates).expect("step"),
        )
    };
    let (backprop_a, step_a) = routines(&mut trained.ctx);
    let (backprop_b, step_b) = routines(&mut resumed);
    for _ in 0..2 {
        trained.ctx.run(&backprop_a).expect("backprop runs");
        resumed.run(&backprop_b).expect("backprop runs");
        assert_eq!(loss_bits(&resumed, &loss), loss_bits(&trained.ctx, &loss));
        trained.ctx.run(&step_a).expect("step runs");
        resumed.run(&step_b).expect("step runs");
    }
    assert_eq!(bits(&resumed, &state), bits(&trained.ctx, &state));
}

#[test]
fn parameters_load_into_a_graph_built_the_same_way() {
    let _turn = one_at_a_time();
    let path = folder("params").join("params.safetensors");
    let first = model(&[8, 3]);
    let mut a = Context::new(&first.graph);
    a.set_seed(1);
    a.init_params().expect("init");
    let forward_a = a.forward(&[&first.loss]).expect("forward");
    a.run(&forward_a).expect("forward runs");
    save_params(&path, &mut a, &first.graph).expect("save");

    let second = model(&[8, 3]);
    let mut b = Context::new(&second.graph);
    b.set_seed(2);
    b.init_params().expect("init");
    let forward_b = b.forward(&[&second.loss]).expect("forward");
    let params_a: Vec<&Tensor> = first.params.iter().collect();
    let params_b: Vec<&Tensor> = second.params.iter().collect();
    assert_ne!(bits(&b, &params_b), bits(&a, &params_a));
    load_params(&path, &mut b, &second.graph).expect("load");
    assert_eq!(bits(&b, &params_b), bits(&a, &params_a));
    b.run(&forward_b).expect("forward runs");
    assert_eq!(loss_bits(&b, &second.loss), loss_bits(&a, &first.loss));
}

/// Loading `path` into a fresh context of `trained`'s graph fails with a message containing each
/// of `expected`, and changes no value.
fn refused(trained: &Trained, path: &Path, tensors: &[&Tensor], expected: &[&str]) {
    let mut ctx = fresh(trained);
    let before = bits(&ctx, tensors);
    let e = load(path, &mut ctx, tensors).expect_err("the load fails");
    for part in expected {
        assert!(e.message.contains(part), "{part:?} not in {:?}", e.message);
    }
    assert!(
        e.message.contains(&path.display().to_string()),
        "{}",
        e.message
    );
    assert_eq!(bits(&ctx, tensors), before);
}

#[test]
fn a_truncated_file_is_refused() {
    let _turn = one_at_a_time();
    let dir = folder("truncated");
    let path = dir.join("model.safetensors");
    let trained = trained(&path);
    let bytes = fs::read(&path).expect("read");
    let cut = dir.join("cut.safetensors");
    fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    refused(
        &trained,
        &cut,
        &trained.state(),
        &["not a readable safetensors file"],
    );
    // Cut inside the 8 bytes of the header's length, and empty.
    fs::write(&cut, &bytes[..5]).expect("write");
    refused(&trained, &cut, &trained.state(), &["header too small"]);
    fs::write(&cut, b"").expect("write");
    refused(&trained, &cut, &trained.state(), &["header too small"]);
}

#[test]
fn garbage_is_refused() {
    let _turn = one_at_a_time();
    let dir = folder("garbage");
    let path = dir.join("model.safetensors");
    let trained = trained(&path);
    let garbage = dir.join("garbage.safetensors");
    fs::write(
        &garbage,
        b"these bytes are no checkpoint, nor anything else at all",
    )
    .expect("write");
    refused(
        &trained,
        &garbage,
        &trained.state(),
        &["not a readable safetensors file"],
    );
    // A header of the right length that is not JSON.
    let mut bytes = fs::read(&path).expect("read");
    for b in &mut bytes[8..40] {
        *b = b'#';
    }
    fs::write(&garbage, &bytes).expect("write");
    refused(
        &trained,
        &garbage,
        &trained.state(),
        &["invalid JSON in header"],
    );
    // A missing file.
    refused(
        &trained,
        &dir.join("nowhere.safetensors"),
        &trained.state(),
        &[],
    );
}

#[test]
fn a_flipped_byte_in_the_values_fails_its_checksum() {
    let _turn = one_at_a_time();
    let dir = folder("flipped");
    let path = dir.join("model.safetensors");
    let trained = trained(&path);
    let mut bytes = fs::read(&path).expect("read");
    let last = bytes.len() - 1;
    bytes[last] ^= 0x40;
    let flipped = dir.join("flipped.safetensors");
    fs::write(&flipped, &bytes).expect("write");
    refused(
        &trained,
        &flipped,
        &trained.state(),
        &["checksum", "corrupted"],
    );
}

#[test]
fn a_checkpoint_of_another_width_is_refused() {
    let _turn = one_at_a_time();
    let dir = folder("width");
    let path = dir.join("model.safetensors");
    let trained = trained(&path);
    let wide = model(&[16, 3]);
    let mut ctx = Context::new(&wide.graph);
    ctx.init_params().expect("init");
    let wide_path = dir.join("wide.safetensors");
    save_params(&wide_path, &mut ctx, &wide.graph).expect("save");
    let params: Vec<&Tensor> = trained.model.params.iter().collect();
    refused(
        &trained,
        &wide_path,
        &params,
        &[
            "tensor 'mlp.0.w'",
            "dims [16, 5] (rows |5->16) in the file",
            "dims [8, 5] (rows |5->8) in memory",
        ],
    );
    // And the other way round.
    let before = bits(&ctx, &wide.params.iter().collect::<Vec<_>>());
    let e = load_params(&path, &mut ctx, &wide.graph).expect_err("the load fails");
    assert!(
        e.message.contains("dims [8, 5] (rows |5->8) in the file"),
        "{e}"
    );
    assert_eq!(bits(&ctx, &wide.params.iter().collect::<Vec<_>>()), before);
}

#[test]
fn a_missing_tensor_is_refused() {
    let _turn = one_at_a_time();
    let dir = folder("missing");
    let path = dir.join("model.safetensors");
    let trained = trained(&path);
    let mut ctx = Context::new(&trained.model.graph);
    ctx.init_params().expect("init");
    let params_only = dir.join("params.safetensors");
    save_params(&params_only, &mut ctx, &trained.model.graph).expect("save");
    // The parameters come first and are in the file: they must not be set either.
    refused(
        &trained,
        &params_only,
        &trained.state(),
        &["no tensor 'mlp.0.w velocity'", "'mlp.0.b'", "'mlp.1.w'"],
    );
}

#[test]
fn rows_and_dtypes_must_match() {
    let _turn = one_at_a_time();
    let dir = folder("rows");
    let path = dir.join("rows.safetensors");
    // Same label, same dims [4, 5] in memory, other rows; then another precision.
    let saved = Graph::new();
    let a = saved.data("t").shape("4|->5").build();
    let mut ctx = Context::new(&saved);
    ctx.set_values(&a, &[1.5; 20]).expect("values");
    save(&path, &mut ctx, &[&a]).expect("save");

    for (shape, precision, expected) in [
        (
            "|5->4",
            Precision::F32,
            "tensor 't' has dims [4, 5] (rows 4|->5) in the file, dims [4, 5] (rows |5->4) in memory",
        ),
        (
            "4|->5",
            Precision::F64,
            "tensor 't' is F32 of dims [4, 5] (rows 4|->5) in the file, F64 of dims [4, 5] \
             (rows 4|->5) in memory (precision f64)",
        ),
    ] {
        let other = Graph::new();
        let b = other.data("t").shape(shape).precision(precision).build();
        let mut ctx = Context::new(&other);
        ctx.set_values(&b, &[0.25; 20]).expect("values");
        let e = load(&path, &mut ctx, &[&b]).expect_err("the load fails");
        assert!(e.message.contains(expected), "{e}");
        assert_eq!(ctx.values(&b).expect("values"), vec![0.25; 20]);
    }
}

/// One data tensor per savable precision, each of shape `2|3->4`.
fn every_precision(graph: &Graph) -> Vec<Tensor> {
    [
        Precision::F64,
        Precision::F16,
        Precision::Bf16,
        Precision::F32,
        Precision::I8,
        Precision::U8,
        Precision::I32,
        Precision::U32,
        Precision::I64,
        Precision::U16,
        Precision::U64,
        Precision::Fp8,
    ]
    .into_iter()
    .map(|p| {
        graph
            .data(&format!("x {p}"))
            .shape("2|3->4")
            .precision(p)
            .build()
    })
    .collect()
}

#[test]
fn every_precision_round_trips_bit_for_bit() {
    let _turn = one_at_a_time();
    let path = folder("precisions").join("all.safetensors");
    let graph = Graph::new();
    let tensors = every_precision(&graph);
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    let mut a = Context::new(&graph);
    let awkward = [
        std::f64::consts::PI,
        1.0 / 3.0,
        -0.0,
        1e-310,
        f64::MAX,
        -1e300,
        0.1,
        f64::INFINITY,
        6.0e-8,
        65504.0,
        -2.5,
        1e-5,
    ];
    for (i, t) in tensors.iter().enumerate() {
        let values: Vec<f64> = if t.precision().is_float() {
            awkward.iter().chain(&awkward).copied().collect()
        } else {
            (0..24)
                .map(|k| f64::from(k * 37 + i as i32) - 60.0)
                .collect()
        };
        a.set_values(t, &values).expect("values");
    }
    // The awkward values include infinities and NaN, which take asking for.
    rcannl_nn::checkpoint::save_allowing_non_finite(&path, &mut a, &tensors).expect("save");

    let mut b = Context::new(&graph);
    for t in &tensors {
        b.set_values(t, &[7.0; 24]).expect("values");
    }
    load(&path, &mut b, &tensors).expect("load");
    assert_eq!(bits(&b, &tensors), bits(&a, &tensors));
    // Nothing was rounded on the way: f64 keeps its awkward values, f16 its own.
    assert_eq!(a.values(tensors[0]).expect("f64")[..12], awkward);
    assert_eq!(
        b.values(tensors[1]).expect("f16")[..4],
        [3.140625, 0.333251953125, -0.0, 0.0]
    );
    assert_eq!(b.values(tensors[1]).expect("f16")[9], 65504.0);
}

#[test]
fn words_and_wide_integers_round_trip_exactly() {
    use rcannl_ir::Value;
    let _turn = one_at_a_time();
    let path = folder("words").join("exact.safetensors");
    let graph = Graph::new();
    let words = graph
        .data("counters")
        .shape("3")
        .precision(Precision::Uint4x32)
        .build();
    let wide = graph
        .data("wide")
        .shape("2")
        .precision(Precision::I64)
        .build();
    let counters: Vec<Value> = (0..3u32)
        .map(|k| Value::Word([k, 0xdead_beef, u32::MAX - k, 7 * k]))
        .collect();
    let beyond = vec![Value::Int((1 << 53) + 1), Value::Int(i64::MIN + 3)];
    let unsigned = graph
        .data("unsigned")
        .shape("2")
        .precision(Precision::U64)
        .build();
    let eighths = graph
        .data("eighths")
        .shape("3")
        .precision(Precision::Fp8)
        .build();
    // u64::MAX and 2^63 + 1, as their bits.
    let top = vec![Value::Int(-1), Value::Int(i64::MIN + 1)];
    let small = vec![
        Value::Float(0.1),
        Value::Float(-57344.0),
        Value::Float(2f64.powi(-16)),
    ];
    let mut a = Context::new(&graph);
    a.set_cells(&words, &counters).expect("cells");
    a.set_cells(&wide, &beyond).expect("cells");
    a.set_cells(&unsigned, &top).expect("cells");
    a.set_cells(&eighths, &small).expect("cells");
    save(&path, &mut a, &[&words, &wide, &unsigned, &eighths]).expect("save");
    // A word is four u32 along one more axis.
    let text = header(&path);
    assert!(
        text.contains("\"counters\":{\"dtype\":\"U32\",\"shape\":[3,4],"),
        "{text}"
    );
    // u64 and fp8 as safetensors names them (fp8 is E5M2, byte for byte).
    assert!(text.contains("\"unsigned\":{\"dtype\":\"U64\""), "{text}");
    assert!(
        text.contains("\"eighths\":{\"dtype\":\"F8_E5M2\""),
        "{text}"
    );
    let mut b = Context::new(&graph);
    load(&path, &mut b, &[&words, &wide, &unsigned, &eighths]).expect("load");
    assert_eq!(b.cells(&words).expect("cells"), counters);
    assert_eq!(b.cells(&wide).expect("cells"), beyond);
    assert_eq!(b.cells(&unsigned).expect("cells"), top);
    // 0.1 is held as the nearest fp8, 0.09375.
    assert_eq!(
        b.values(&eighths).expect("values"),
        [0.09375, -57344.0, 2f64.powi(-16)]
    );
}

/// The header of a safetensors file: its JSON text.
pub(crate) fn header(path: &Path) -> String {
    let bytes = fs::read(path).expect("read");
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    String::from_utf8(bytes[8..8 + n].to_vec()).expect("UTF-8")
}

#[test]
fn the_file_is_safetensors_with_rows_and_checksums() {
    let _turn = one_at_a_time();
    let path = folder("format").join("all.safetensors");
    let graph = Graph::new();
    let tensors = every_precision(&graph);
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    let mut ctx = Context::new(&graph);
    for t in &tensors {
        ctx.set_values(t, &[0.0; 24]).expect("values");
    }
    save(&path, &mut ctx, &tensors).expect("save");
    let text = header(&path);
    // Dims in memory order: batch, output, input.
    for (label, dtype) in [
        ("x f64", "F64"),
        ("x f16", "F16"),
        ("x bf16", "BF16"),
        ("x f32", "F32"),
        ("x i8", "I8"),
        ("x u8", "U8"),
        ("x i32", "I32"),
        ("x u32", "U32"),
        ("x i64", "I64"),
    ] {
        let entry = format!("\"{label}\":{{\"dtype\":\"{dtype}\",\"shape\":[2,4,3],");
        assert!(text.contains(&entry), "{entry} not in {text}");
        assert!(
            text.contains(&format!("\"rows:{label}\":\"2|3->4\"")),
            "{text}"
        );
        assert!(
            text.contains(&format!("\"checksum:{label}\":\"fnv1a64:")),
            "{text}"
        );
    }
    // Twelve zero bytes of f32, then the id of `z`, the first tensor of its graph ("0"), hash to
    // FNV-1a's value for them.
    let one = Graph::new();
    let z = one.data("z").shape("3").values(vec![0.0; 3]).build();
    let mut ctx = Context::new(&one);
    save(&path, &mut ctx, &[&z]).expect("save");
    let zeros = (0..12).fold(0xcbf2_9ce4_8422_2325_u64, |h, _| {
        h.wrapping_mul(0x0100_0000_01b3)
    });
    let then_id = (zeros ^ u64::from(b'0')).wrapping_mul(0x0100_0000_01b3);
    let text = header(&path);
    assert!(
        text.contains(&format!("\"checksum:z\":\"fnv1a64:{then_id:016x}\"")),
        "{text}"
    );
    assert!(text.contains("\"id:z\":\"0\""), "{text}");
}

#[test]
fn a_failed_save_leaves_the_old_checkpoint() {
    let _turn = one_at_a_time();
    let dir = folder("failed-save");
    let path = dir.join("model.safetensors");
    let graph = Graph::new();
    let x = graph
        .data("x")
        .shape("3")
        .values(vec![1.0, 2.0, 3.0])
        .build();
    let twin = graph.data("x").shape("2").build();
    let mut ctx = Context::new(&graph);
    save(&path, &mut ctx, &[&x]).expect("save");
    let before = fs::read(&path).expect("read");

    let e = save(&path, &mut ctx, &[&x, &twin]).expect_err("two labels 'x'");
    assert!(e.message.contains("two tensors are labelled 'x'"), "{e}");
    let e = load(&path, &mut ctx, &[&x, &twin]).expect_err("two labels 'x'");
    assert!(e.message.contains("two tensors are labelled 'x'"), "{e}");
    let e = save(
        &dir.join("no such folder").join("m.safetensors"),
        &mut ctx,
        &[&x],
    )
    .expect_err("no folder");
    assert!(e.message.contains("no such folder"), "{e}");

    assert_eq!(fs::read(&path).expect("read"), before);
    let names: Vec<String> = fs::read_dir(&dir)
        .expect("list")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        names,
        vec!["model.safetensors"],
        "no temporary file is left"
    );
}

/// Two small tensors of a fresh graph, `a` (f32) and `b` (f64), with distinct values, saved at
/// `path`; and a context of the graph where both hold other values, to load into.
fn small(path: &Path) -> (Vec<Tensor>, Context) {
    let graph = Graph::new();
    let a = graph.data("a").shape("3").build();
    let b = graph.data("b").shape("2").precision(Precision::F64).build();
    let mut ctx = Context::new(&graph);
    ctx.set_values(&a, &[1.5, -2.25, 1e-3]).expect("values");
    ctx.set_values(&b, &[std::f64::consts::E, -0.0])
        .expect("values");
    save(path, &mut ctx, &[&a, &b]).expect("save");
    let mut other = Context::new(&graph);
    other.set_values(&a, &[7.0; 3]).expect("values");
    other.set_values(&b, &[7.0; 2]).expect("values");
    (vec![a, b], other)
}

/// The header's length, and where the bytes of tensor `label` lie in the file.
fn layout(bytes: &[u8], label: &str) -> (usize, std::ops::Range<usize>) {
    let (n, contents) = safetensors::SafeTensors::read_metadata(bytes).expect("a valid file");
    let (start, end) = contents.info(label).expect("the tensor").data_offsets;
    (n, 8 + n + start..8 + n + end)
}

/// Where `needle` first occurs in `bytes`.
fn position(bytes: &[u8], needle: &str) -> usize {
    bytes
        .windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .unwrap_or_else(|| panic!("{needle} in the file"))
}

#[test]
fn a_flip_hiding_a_checksum_does_not_let_a_corrupted_tensor_load() {
    let _turn = one_at_a_time();
    let dir = folder("hidden-checksum");
    let path = dir.join("small.safetensors");
    let (tensors, mut ctx) = small(&path);
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    let mut bytes = fs::read(&path).expect("read");
    // `checksum:a` becomes `Checksum:a`, and one bit of a's values flips.
    let key = position(&bytes, "checksum:a");
    bytes[key] ^= 0x20;
    let (_, data) = layout(&bytes, "a");
    bytes[data.start + 1] ^= 0x08;
    let corrupted = dir.join("corrupted.safetensors");
    fs::write(&corrupted, &bytes).expect("write");
    let before = bits(&ctx, &tensors);
    let e = load(&corrupted, &mut ctx, &tensors).expect_err("the load fails");
    assert!(e.message.contains("corrupted"), "{e}");
    assert_eq!(bits(&ctx, &tensors), before);
}

#[test]
fn every_one_bit_flip_is_refused() {
    let _turn = one_at_a_time();
    let dir = folder("one-bit");
    let path = dir.join("small.safetensors");
    let (tensors, mut ctx) = small(&path);
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    let bytes = fs::read(&path).expect("read");
    let before = bits(&ctx, &tensors);
    let flipped = dir.join("flipped.safetensors");
    let mut loaded = Vec::new();
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut copy = bytes.clone();
            copy[i] ^= 1 << bit;
            fs::write(&flipped, &copy).expect("write");
            if load(&flipped, &mut ctx, &tensors).is_ok() {
                loaded.push((i, bit));
                ctx.set_values(tensors[0], &[7.0; 3]).expect("values");
                ctx.set_values(tensors[1], &[7.0; 2]).expect("values");
            }
            assert_eq!(bits(&ctx, &tensors), before, "byte {i}, bit {bit}");
        }
    }
    assert_eq!(loaded, vec![], "flips (byte, bit) that loaded");
}

/// An FNV-1a checksum, as the module doc defines it: `fnv1a64:` and 16 hex digits.
pub(crate) fn fnv1a64(bytes: impl IntoIterator<Item = u8>) -> String {
    let hash = bytes.into_iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("fnv1a64:{hash:016x}")
}

#[test]
fn a_checkpoint_without_a_header_checksum_is_refused() {
    let _turn = one_at_a_time();
    let dir = folder("no-header-checksum");
    let path = dir.join("small.safetensors");
    let (tensors, mut ctx) = small(&path);
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    // The layout checkpoints had before they carried a header checksum: rows and a checksum
    // per tensor in the metadata, nothing else.
    let a: Vec<u8> = [1.5f32, -2.25, 1e-3]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let b: Vec<u8> = [std::f64::consts::E, -0.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let metadata = std::collections::HashMap::from([
        ("rows:a".to_owned(), "|->3".to_owned()),
        ("rows:b".to_owned(), "|->2".to_owned()),
        ("checksum:a".to_owned(), fnv1a64(a.iter().copied())),
        ("checksum:b".to_owned(), fnv1a64(b.iter().copied())),
    ]);
    let views = [
        (
            "a",
            safetensors::tensor::TensorView::new(safetensors::Dtype::F32, vec![3], &a)
                .expect("a view"),
        ),
        (
            "b",
            safetensors::tensor::TensorView::new(safetensors::Dtype::F64, vec![2], &b)
                .expect("a view"),
        ),
    ];
    let old = dir.join("old.safetensors");
    fs::write(
        &old,
        safetensors::serialize(views, Some(metadata)).expect("serialize"),
    )
    .expect("write");
    let before = bits(&ctx, &tensors);
    let e = load(&old, &mut ctx, &tensors).expect_err("the load fails");
    assert!(e.message.contains("no header checksum"), "{e}");
    assert_eq!(bits(&ctx, &tensors), before);
}

/// How every header starts, up to the header checksum's 16 hex digits.
const HEADER_START: &str = r#"{"__metadata__":{"header checksum":"fnv1a64:"#;

/// Records in `bytes` the header checksum of its header, as the module doc defines it: the
/// FNV-1a hash of the first `8 + n` bytes without the digits that record it.
pub(crate) fn reseal(bytes: &mut [u8]) {
    let n = u64::from_le_bytes(bytes[..8].try_into().expect("8 bytes")) as usize;
    let digits = 8 + HEADER_START.len()..8 + HEADER_START.len() + 16;
    assert!(bytes[8..].starts_with(HEADER_START.as_bytes()));
    let hash = fnv1a64(
        bytes[..digits.start]
            .iter()
            .chain(&bytes[digits.end..8 + n])
            .copied(),
    );
    bytes[digits].copy_from_slice(&hash.as_bytes()["fnv1a64:".len()..]);
}

#[test]
fn the_header_checksum_is_the_documented_hash() {
    let _turn = one_at_a_time();
    let path = folder("header-checksum").join("small.safetensors");
    small(&path);
    let bytes = fs::read(&path).expect("read");
    let mut resealed = bytes.clone();
    reseal(&mut resealed);
    assert_eq!(resealed, bytes);
}

#[test]
fn every_tensor_needs_its_checksum_even_under_a_consistent_header() {
    let _turn = one_at_a_time();
    let dir = folder("tensor-checksum");
    let path = dir.join("small.safetensors");
    let (tensors, mut ctx) = small(&path);
    let b = &tensors[1..];
    let b: Vec<&Tensor> = b.iter().collect();
    let mut bytes = fs::read(&path).expect("read");
    // `checksum:a` becomes `checksum_a`, and the header checksum is recomputed: `a` has no
    // checksum, and even a load of `b` alone is refused.
    let key = position(&bytes, "checksum:a") + "checksum".len();
    bytes[key] = b'_';
    reseal(&mut bytes);
    let unsealed = dir.join("unsealed.safetensors");
    fs::write(&unsealed, &bytes).expect("write");
    let before = bits(&ctx, &b);
    let e = load(&unsealed, &mut ctx, &b).expect_err("the load fails");
    assert!(e.message.contains("tensor 'a' has no checksum"), "{e}");
    assert_eq!(bits(&ctx, &b), before);
}

/// A FIFO at `path`, made by `mkfifo`.
#[cfg(unix)]
fn fifo(path: &Path) {
    let status = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .expect("mkfifo runs");
    assert!(status.success(), "mkfifo {}", path.display());
}

#[cfg(unix)]
#[test]
fn only_regular_files_are_loaded() {
    let _turn = one_at_a_time();
    let dir = folder("load-irregular");
    let (tensors, mut ctx) = small(&dir.join("small.safetensors"));
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    let before = bits(&ctx, &tensors);
    // An endless device, a FIFO no one writes to (opening it would wait), a symbolic link to the
    // device, and a folder.
    let queue = dir.join("queue");
    fifo(&queue);
    let link = dir.join("zeros.safetensors");
    std::os::unix::fs::symlink("/dev/zero", &link).expect("a symbolic link");
    for (path, kind) in [
        (Path::new("/dev/zero"), "a character device"),
        (&queue, "a FIFO"),
        (&link, "a character device"),
        (&dir, "a folder"),
    ] {
        let e = load(path, &mut ctx, &tensors).expect_err("the load fails");
        assert!(
            e.message.contains(&format!("not a regular file: {kind}")),
            "{e}"
        );
        assert!(e.message.contains(&path.display().to_string()), "{e}");
        assert_eq!(bits(&ctx, &tensors), before);
    }
}

#[test]
fn a_header_length_beyond_the_file_is_refused() {
    let _turn = one_at_a_time();
    let dir = folder("header-length");
    let path = dir.join("small.safetensors");
    let (tensors, mut ctx) = small(&path);
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    let mut bytes = fs::read(&path).expect("read");
    let size = bytes.len();
    let long = dir.join("long.safetensors");
    for n in [size as u64 - 7, 1 << 40, u64::MAX] {
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        fs::write(&long, &bytes).expect("write");
        let e = load(&long, &mut ctx, &tensors).expect_err("the load fails");
        let expected =
            format!("the header's length ({n} bytes) runs past the end of the file ({size} bytes)");
        assert!(e.message.contains(&expected), "{e}");
    }
}

/// The names in `dir`, sorted.
fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("list")
        .map(|entry| {
            entry
                .expect("entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}

#[cfg(unix)]
#[test]
fn a_save_through_a_symbolic_link_replaces_the_file_it_points_to() {
    use std::os::unix::fs::PermissionsExt;
    let _turn = one_at_a_time();
    let dir = folder("save-link");
    let real = dir.join("real.safetensors");
    let (tensors, _) = small(&real);
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    fs::set_permissions(&real, fs::Permissions::from_mode(0o640)).expect("permissions");
    let link = dir.join("link.safetensors");
    std::os::unix::fs::symlink("real.safetensors", &link).expect("a symbolic link");

    let graph = tensors[0].graph();
    let mut ctx = Context::new(graph);
    ctx.set_values(tensors[0], &[3.0, 4.0, 5.0])
        .expect("values");
    ctx.set_values(tensors[1], &[6.0, 7.0]).expect("values");
    save(&link, &mut ctx, &tensors).expect("save");

    assert!(
        fs::symlink_metadata(&link).expect("the link").is_symlink(),
        "the link stays a link"
    );
    assert_eq!(
        fs::read_link(&link).expect("the link"),
        Path::new("real.safetensors")
    );
    let mode = fs::metadata(&real).expect("the file").permissions().mode();
    assert_eq!(mode & 0o777, 0o640, "the file keeps its permissions");
    let mut other = Context::new(graph);
    load(&real, &mut other, &tensors).expect("load");
    assert_eq!(bits(&other, &tensors), bits(&ctx, &tensors));
    assert_eq!(listing(&dir), ["link.safetensors", "real.safetensors"]);
}

#[cfg(unix)]
#[test]
fn a_save_over_anything_but_a_regular_file_is_refused_and_leaves_it() {
    use std::os::unix::fs::FileTypeExt;
    let _turn = one_at_a_time();
    let dir = folder("save-irregular");
    let (tensors, mut ctx) = small(&dir.join("small.safetensors"));
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    let queue = dir.join("queue");
    fifo(&queue);
    let socket = dir.join("socket");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).expect("a socket");
    let to_queue = dir.join("to-queue");
    std::os::unix::fs::symlink("queue", &to_queue).expect("a symbolic link");
    let nowhere = dir.join("nowhere");
    std::os::unix::fs::symlink("missing.safetensors", &nowhere).expect("a symbolic link");
    let sub = dir.join("sub");
    fs::create_dir(&sub).expect("a folder");
    let before = listing(&dir);
    for (path, expected) in [
        (&queue, "not a regular file: a FIFO".to_owned()),
        (&socket, "not a regular file: a socket".to_owned()),
        (
            &to_queue,
            format!(
                "a symbolic link to {}, not a regular file: a FIFO",
                queue.display()
            ),
        ),
        (
            &nowhere,
            "a symbolic link to missing.safetensors, which cannot be followed".to_owned(),
        ),
        (&sub, "not a regular file: a folder".to_owned()),
    ] {
        let e = save(path, &mut ctx, &tensors).expect_err("the save fails");
        assert!(e.message.contains(&expected), "{e}");
        assert!(e.message.contains(&path.display().to_string()), "{e}");
    }
    assert_eq!(listing(&dir), before, "nothing is added or replaced");
    let kind = |path: &Path| fs::symlink_metadata(path).expect("metadata").file_type();
    assert!(kind(&queue).is_fifo());
    assert!(kind(&socket).is_socket());
    assert!(kind(&to_queue).is_symlink());
    assert!(kind(&nowhere).is_symlink());
    assert!(kind(&sub).is_dir());
    assert_eq!(listing(&sub), Vec::<String>::new());
}

/// A save to a device node (`/dev/full`'s: a character device whose writes fail) is refused and
/// leaves the node a device. The node is made in the test's own folder, so that a regression
/// could only replace that one.
#[cfg(target_os = "linux")]
#[test]
fn a_save_over_a_device_is_refused_and_leaves_it() {
    use std::os::unix::fs::FileTypeExt;
    let _turn = one_at_a_time();
    let dir = folder("save-device");
    let (tensors, mut ctx) = small(&dir.join("small.safetensors"));
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    let full = dir.join("full");
    let made = std::process::Command::new("mknod")
        .arg(&full)
        .args(["c", "1", "7"])
        .status()
        .is_ok_and(|status| status.success());
    if !made {
        println!(
            "a device node cannot be made here (mknod needs root): the device case did not run"
        );
        return;
    }
    let e = save(&full, &mut ctx, &tensors).expect_err("the save fails");
    assert!(e.message.contains("not a regular file"), "{e}");
    let kind = fs::symlink_metadata(&full).expect("metadata").file_type();
    assert!(kind.is_char_device(), "the device is left a device");
}

#[cfg(target_os = "linux")]
#[test]
fn a_save_into_a_folder_that_takes_no_files_fails() {
    let _turn = one_at_a_time();
    let dir = folder("save-unwritable");
    let (tensors, mut ctx) = small(&dir.join("small.safetensors"));
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    // No one, not even the superuser, creates a file in /proc.
    let path = Path::new("/proc/rcannl-checkpoint.safetensors");
    let e = save(path, &mut ctx, &tensors).expect_err("the save fails");
    assert!(
        e.message
            .contains("save checkpoint /proc/rcannl-checkpoint.safetensors: cannot create"),
        "{e}"
    );
    assert!(!path.exists());
}

#[test]
fn labels_that_json_escapes_round_trip() {
    let _turn = one_at_a_time();
    let dir = folder("escaped-labels");
    let path = dir.join("escaped.safetensors");
    let graph = Graph::new();
    let labels = [
        "a \"quoted\" one",
        "back\\slash",
        "new\nline\ttab",
        "ünïcødé ✓",
    ];
    let tensors: Vec<Tensor> = labels
        .iter()
        .map(|label| graph.data(label).shape("2").build())
        .collect();
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    let mut a = Context::new(&graph);
    for (i, t) in tensors.iter().enumerate() {
        a.set_values(t, &[i as f64, -(i as f64) - 0.5])
            .expect("values");
    }
    save(&path, &mut a, &tensors).expect("save");
    let mut b = Context::new(&graph);
    load(&path, &mut b, &tensors).expect("load");
    assert_eq!(bits(&b, &tensors), bits(&a, &tensors));
}

#[test]
fn the_same_values_save_to_the_same_bytes() {
    let _turn = one_at_a_time();
    let dir = folder("deterministic");
    let (first, second) = (
        dir.join("first.safetensors"),
        dir.join("second.safetensors"),
    );
    let graph = Graph::new();
    let tensors = every_precision(&graph);
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    let mut ctx = Context::new(&graph);
    for t in &tensors {
        ctx.set_values(t, &[3.0; 24]).expect("values");
    }
    save(&first, &mut ctx, &tensors).expect("save");
    let mut reversed = tensors.clone();
    reversed.reverse();
    save(&second, &mut ctx, &reversed).expect("save");
    assert_eq!(
        fs::read(&first).expect("read"),
        fs::read(&second).expect("read")
    );
}

/// A batch-normalized model on images `n|->2,2,3`, and its logits for `train` (in train mode)
/// and for `test` (in eval mode).
fn normalized_model(graph: &Graph, train: &Tensor, test: &Tensor) -> (Tensor, Tensor) {
    use rcannl_nn::norm::{BatchNorm, Mode};
    let norm = BatchNorm::new(graph, "bn", 3);
    let head = graph.param("head").shape("|2,2,3->2").build();
    (
        &head * &norm.apply(train, Mode::Train),
        &head * &norm.apply(test, Mode::Eval),
    )
}

#[test]
fn a_reloaded_batch_normalized_model_evaluates_as_the_saved_one() {
    let _turn = one_at_a_time();
    let dir = folder("running-statistics");
    let path = dir.join("model.safetensors");
    let values = |seed| rcannl_tensor::gradcheck::test_values(8 * 12, seed);
    let shape = "8|->2,2,3";
    let test_values = values(9);

    let graph = Graph::new();
    let x = graph.data("x").shape(shape).build();
    let test = graph
        .data("test")
        .shape(shape)
        .values(test_values.clone())
        .build();
    let (logits, test_logits) = normalized_model(&graph, &x, &test);
    let loss = mean(&logits.pmul(&logits));
    let mut sgd = rcannl_nn::optim::Sgd::new(&graph, &graph.params(), 0.1, 0.0);
    let mut ctx = Context::new(&graph);
    ctx.init_params().expect("init");
    let step = sgd.compile_step(&mut ctx, &loss).expect("step");
    for seed in 0..3 {
        let shifted: Vec<f64> = values(seed).iter().map(|v| 3.0 * v + 2.0).collect();
        ctx.set_values(&x, &shifted).expect("data");
        ctx.run(&step).expect("step");
    }
    let evaluate = ctx.forward(&[&test_logits]).expect("evaluation");
    ctx.run(&evaluate).expect("evaluation");
    let trained = ctx.values(&test_logits).expect("logits");
    save_params(&path, &mut ctx, &graph).expect("save");

    // A program that only evaluates: the block is never applied in train mode there.
    let fresh = Graph::new();
    let test = fresh.data("test").shape(shape).values(test_values).build();
    let norm = rcannl_nn::norm::BatchNorm::new(&fresh, "bn", 3);
    let head = fresh.param("head").shape("|2,2,3->2").build();
    let test_logits = &head * &norm.apply(&test, rcannl_nn::norm::Mode::Eval);
    assert_eq!(fresh.state_tensors(), norm.state());
    let mut reloaded = Context::new(&fresh);
    load_params(&path, &mut reloaded, &fresh).expect("load");
    let evaluate = reloaded.forward(&[&test_logits]).expect("evaluation");
    reloaded.run(&evaluate).expect("evaluation");
    assert_eq!(reloaded.values(&test_logits).expect("logits"), trained);
}

#[test]
fn a_checkpoint_of_values_that_are_not_finite_needs_asking_for() {
    let _turn = one_at_a_time();
    let dir = folder("non-finite");
    let path = dir.join("model.safetensors");
    let graph = Graph::new();
    let w = graph.param("w").shape("3").build();
    let mut ctx = Context::new(&graph);
    ctx.set_values(&w, &[1.0, 2.0, 3.0]).expect("values");
    save_params(&path, &mut ctx, &graph).expect("a finite save");
    let good = fs::read(&path).expect("the file");
    ctx.set_values(&w, &[1.0, f64::NAN, 3.0]).expect("values");
    let e = save_params(&path, &mut ctx, &graph).expect_err("refused");
    assert!(
        e.message.contains("tensor 'w' holds NaN at cell 1")
            && e.message.contains("save_allowing_non_finite"),
        "{}",
        e.message
    );
    assert_eq!(
        fs::read(&path).expect("the file"),
        good,
        "the good file is kept"
    );
    rcannl_nn::checkpoint::save_allowing_non_finite(&path, &mut ctx, &[&w]).expect("asked for");
    ctx.set_values(&w, &[0.0; 3]).expect("values");
    load(&path, &mut ctx, &[&w]).expect("load");
    assert!(ctx.values(&w).expect("values")[1].is_nan());
}

/// Appending adds tensors to a checkpoint and replaces those of the same label, keeping the
/// others bit for bit; without a file it saves; a corrupted file is refused and left as it was.
#[test]
fn appending_adds_to_a_checkpoint_and_replaces_by_label() {
    let _turn = one_at_a_time();
    let dir = folder("append");
    let path = dir.join("model.safetensors");
    let trained = trained(&path);
    let mut ctx = trained.ctx;
    let params: Vec<&Tensor> = trained.model.params.iter().collect();
    let velocities: Vec<&Tensor> = trained.velocities.iter().collect();
    let saved = bits(&ctx, &[params.as_slice(), velocities.as_slice()].concat());

    // A new tensor, and the first parameter changed since the save.
    let step = trained
        .model
        .graph
        .data("step")
        .shape("|->1")
        .values(vec![3.0])
        .build();
    let forward = ctx.forward(&[&step]).expect("forward");
    ctx.run(&forward).expect("forward runs");
    let plus_one: Vec<f64> = ctx
        .values(params[0])
        .unwrap()
        .iter()
        .map(|x| x + 1.0)
        .collect();
    ctx.set_values(params[0], &plus_one).unwrap();
    let changed = ctx.values(params[0]).unwrap();
    append(&path, &mut ctx, &[&step, params[0]]).expect("append");

    let mut loaded = Context::new(&trained.model.graph);
    loaded.set_seed(2);
    loaded.init_params().expect("init");
    loaded.forward(&[&step]).expect("forward");
    loaded.update(&trained.updates).expect("step");
    let everything: Vec<&Tensor> = [params.as_slice(), velocities.as_slice(), &[&step]].concat();
    load(&path, &mut loaded, &everything).expect("load");
    let mut expected = saved.clone();
    expected[0] = changed.iter().map(|x| x.to_bits()).collect();
    expected.push(vec![3.0f64.to_bits()]);
    assert_eq!(bits(&loaded, &everything), expected);

    let alone = dir.join("alone.safetensors");
    append(&alone, &mut ctx, &[&step]).expect("append to no file");
    let mut only = Context::new(&trained.model.graph);
    only.forward(&[&step]).expect("forward");
    only.set_values(&step, &[0.0]).unwrap();
    load(&alone, &mut only, &[&step]).expect("load");
    assert_eq!(only.values(&step).unwrap(), [3.0]);

    let mut corrupted = fs::read(&path).unwrap();
    let last = corrupted.len() - 1;
    corrupted[last] ^= 1;
    fs::write(&path, &corrupted).unwrap();
    let e = append(&path, &mut ctx, &[&step]).unwrap_err().message;
    assert!(
        e.contains("append to checkpoint") && e.contains("corrupted"),
        "{e}"
    );
    assert_eq!(fs::read(&path).unwrap(), corrupted);
}

/// A checkpoint loads as new tensors of another graph, built by no program that knew the model:
/// labels, rows, precisions and values as saved; as parameters, they hold the values once
/// initialized, and a model computed from them gives the saved model's loss.
#[test]
fn a_checkpoint_loads_as_new_tensors() {
    let _turn = one_at_a_time();
    let path = folder("as-new").join("model.safetensors");
    let trained = trained(&path);
    let state = trained.state();

    let graph = Graph::new();
    let loaded = load_as_new(&path, &graph, NewTensors::Params).expect("load as new");
    let mut labels: Vec<String> = state.iter().map(|t| t.label()).collect();
    labels.sort();
    assert_eq!(loaded.iter().map(Tensor::label).collect::<Vec<_>>(), labels);
    let mut ctx = Context::new(&graph);
    for (t, saved) in loaded.iter().zip(&labels) {
        let original = state.iter().find(|s| s.label() == *saved).unwrap();
        assert_eq!(t.shape(), original.shape(), "{saved}");
        assert_eq!(t.precision(), original.precision(), "{saved}");
        ctx.forward(&[t]).expect("forward");
    }
    ctx.init_params().expect("init");
    for (t, saved) in loaded.iter().zip(&labels) {
        let original = state.iter().find(|s| s.label() == *saved).unwrap();
        assert_eq!(bits(&ctx, &[t]), bits(&trained.ctx, &[original]), "{saved}");
        assert!(t.is_differentiable(), "{saved}");
    }

    let data = load_as_new(&path, &Graph::new(), NewTensors::Data).expect("load as data");
    assert!(data.iter().all(|t| !t.is_differentiable()));
}

/// 128-bit words and 64-bit integers beyond 2^53 make no new tensor: an error naming it.
#[test]
fn words_and_wide_integers_do_not_load_as_new_tensors() {
    let _turn = one_at_a_time();
    let path = folder("as-new-wide").join("wide.safetensors");
    let graph = Graph::new();
    let wide = graph
        .data("wide")
        .shape("|->2")
        .precision(Precision::I64)
        .values(vec![1.0, 2.0])
        .build();
    let mut ctx = Context::new(&graph);
    let forward = ctx.forward(&[&wide]).expect("forward");
    ctx.run(&forward).expect("forward runs");
    ctx.set_cells(&wide, &[Value::Int(1 << 60), Value::Int(5)])
        .unwrap();
    save(&path, &mut ctx, &[&wide]).expect("save");
    let e = load_as_new(&path, &Graph::new(), NewTensors::Data)
        .unwrap_err()
        .message;
    assert!(e.contains("'wide'") && e.contains("2^53"), "{e}");
}

/// A u64 from 2^63 up (its bits a negative i64) makes no new tensor either, rather than a
/// negative number; small u64, u16 and fp8 values load as new tensors of their precisions.
#[test]
fn u64_beyond_2_53_does_not_load_as_a_new_tensor_and_narrow_precisions_do() {
    let _turn = one_at_a_time();
    let path = folder("as-new-u64").join("u64.safetensors");
    let graph = Graph::new();
    let tensors: Vec<Tensor> = [Precision::U64, Precision::U16, Precision::Fp8]
        .into_iter()
        .map(|p| {
            graph
                .data(&format!("x {p}"))
                .shape("2")
                .precision(p)
                .build()
        })
        .collect();
    let refs: Vec<&Tensor> = tensors.iter().collect();
    let mut ctx = Context::new(&graph);
    ctx.set_cells(&tensors[0], &[Value::Int(-1), Value::Int(5)])
        .unwrap();
    ctx.set_values(&tensors[1], &[65535.0, 1.0]).unwrap();
    ctx.set_values(&tensors[2], &[0.75, -3.0]).unwrap();
    save(&path, &mut ctx, &refs).expect("save");
    let e = load_as_new(&path, &Graph::new(), NewTensors::Data)
        .unwrap_err()
        .message;
    assert!(e.contains("'x u64'") && e.contains("2^53"), "{e}");
    ctx.set_cells(&tensors[0], &[Value::Int(7), Value::Int(5)])
        .unwrap();
    save(&path, &mut ctx, &refs).expect("save");
    let loaded = load_as_new(&path, &Graph::new(), NewTensors::Data).expect("loads");
    let precisions: Vec<Precision> = loaded.iter().map(Tensor::precision).collect();
    for p in [Precision::U64, Precision::U16, Precision::Fp8] {
        assert!(precisions.contains(&p), "{precisions:?}");
    }
}
