//! `.npy` files through a context, on both backends: what `save_npy` writes is what the `npyz`
//! crate reads (dims in memory order, the dtype of the tensor's precision), `load_npy` reads
//! what `npyz` writes and what `save_npy` wrote, and files of other dims or that are not `.npy`
//! arrays are errors naming the file, the tensor and the shapes.

use std::fs::File;
use std::path::{Path, PathBuf};

use npyz::WriterBuilder;
use rcannl_backends::cc::Compiler;
use rcannl_backends::{Backend, Interpreter};
use rcannl_ir::{Precision, Value};
use rcannl_tensor::{Context, Graph, Tensor};

fn backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(Interpreter),
        Box::new(Compiler::find().expect("a C compiler (cc or $CC)")),
    ]
}

/// A fresh folder for one test.
fn folder(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("rcannl-npy-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a test folder");
    dir
}

/// Cell (b, o, i) of a `2|3->2` tensor holds 100b + 10o + i - 50.5: memory order is batch,
/// output, input, so the file's dims are (2, 2, 3).
fn values() -> Vec<f64> {
    (0..2)
        .flat_map(|b| {
            (0..2).flat_map(move |o| (0..3).map(move |i| f64::from(100 * b + 10 * o + i) - 50.5))
        })
        .collect()
}

fn data(graph: &Graph, label: &str, precision: Precision) -> Tensor {
    graph
        .data(label)
        .shape("2|3->2")
        .precision(precision)
        .build()
}

/// A context in which `tensors` have buffers.
fn context(graph: &Graph, backend: Box<dyn Backend>, tensors: &[&Tensor]) -> Context {
    let mut ctx = Context::with_backend(graph, backend);
    ctx.forward(tensors).expect("a forward routine");
    ctx
}

fn read_with_npyz(path: &Path) -> npyz::NpyFile<File> {
    npyz::NpyFile::new(File::open(path).unwrap()).unwrap()
}

#[test]
fn saved_files_are_read_by_npyz() {
    for backend in backends() {
        let name = backend.name();
        let dir = folder(&format!("save-{name}"));
        let graph = Graph::new();
        let x = data(&graph, "x", Precision::F32);
        let wide = data(&graph, "wide", Precision::F64);
        let counts = data(&graph, "counts", Precision::I32);
        let doubled = &wide * 2.0;
        let mut ctx = context(&graph, backend, &[&x, &doubled, &counts]);
        ctx.set_values(&x, &values()).unwrap();
        ctx.set_values(&wide, &values()).unwrap();
        ctx.set_values(&counts, &values()).unwrap();
        let forward = ctx.forward(&[&doubled]).unwrap();
        ctx.run(&forward).unwrap();

        ctx.save_npy(&x, dir.join("x.npy")).unwrap();
        let file = read_with_npyz(&dir.join("x.npy"));
        assert_eq!(file.shape(), &[2, 2, 3]);
        assert_eq!(file.dtype().descr(), "'<f4'");
        let expected: Vec<f32> = values().iter().map(|&v| v as f32).collect();
        assert_eq!(file.into_vec::<f32>().unwrap(), expected, "{name}");

        ctx.save_npy(&doubled, dir.join("doubled.npy")).unwrap();
        let file = read_with_npyz(&dir.join("doubled.npy"));
        assert_eq!(file.dtype().descr(), "'<f8'");
        let expected: Vec<f64> = values().iter().map(|&v| 2.0 * v).collect();
        assert_eq!(file.into_vec::<f64>().unwrap(), expected, "{name}");

        ctx.save_npy(&counts, dir.join("counts.npy")).unwrap();
        let file = read_with_npyz(&dir.join("counts.npy"));
        assert_eq!(file.dtype().descr(), "'<i4'");
        // Stored in i32, the values truncate toward 0.
        let expected: Vec<i32> = values().iter().map(|&v| v as i32).collect();
        assert_eq!(file.into_vec::<i32>().unwrap(), expected, "{name}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn files_npyz_writes_and_saved_files_load() {
    for backend in backends() {
        let name = backend.name();
        let dir = folder(&format!("load-{name}"));
        let path = dir.join("from-npyz.npy");
        {
            let mut file = File::create(&path).unwrap();
            let mut writer = npyz::WriteOptions::new()
                .default_dtype()
                .shape(&[2, 2, 3])
                .writer(&mut file)
                .begin_nd()
                .unwrap();
            writer.extend(values()).unwrap();
            writer.finish().unwrap();
        }
        let graph = Graph::new();
        let x = data(&graph, "x", Precision::F32);
        let y = data(&graph, "y", Precision::F64);
        let sum = &x + &y;
        let mut ctx = context(&graph, backend, &[&sum]);
        ctx.load_npy(&x, &path).unwrap();
        ctx.save_npy(&x, dir.join("x.npy")).unwrap();
        ctx.load_npy(&y, dir.join("x.npy")).unwrap();
        let forward = ctx.forward(&[&sum]).unwrap();
        ctx.run(&forward).unwrap();
        // Every value is a multiple of 0.5 below 2^24: exact in f32.
        assert_eq!(ctx.values(&x).unwrap(), values(), "{name}");
        assert_eq!(ctx.values(&y).unwrap(), values(), "{name}");
        let doubled: Vec<f64> = values().iter().map(|v| 2.0 * v).collect();
        assert_eq!(ctx.values(&sum).unwrap(), doubled, "{name}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn files_of_other_dims_or_not_npy_arrays_are_errors() {
    let dir = folder("errors");
    let graph = Graph::new();
    let x = data(&graph, "x", Precision::F32);
    let other = graph.data("other").shape("3|2->2").build();
    let mut ctx = context(&graph, Box::new(Interpreter), &[&x, &other]);
    ctx.set_values(&other, &values()).unwrap();
    let saved = dir.join("other.npy");
    ctx.save_npy(&other, &saved).unwrap();

    let e = ctx.load_npy(&x, &saved).unwrap_err().message;
    for part in [
        saved.display().to_string().as_str(),
        "'x'",
        "(3, 2, 2)",
        "(2, 2, 3)",
        "2|3->2",
    ] {
        assert!(e.contains(part), "{part} in {e}");
    }

    let garbage = dir.join("garbage.npy");
    std::fs::write(&garbage, b"not an array").unwrap();
    let e = ctx.load_npy(&x, &garbage).unwrap_err().message;
    assert!(
        e.contains("garbage.npy") && e.contains("not a .npy file"),
        "{e}"
    );

    // The header of a (2, 2, 3) array of doubles with half of its data.
    let header_says = dir.join("truncated.npy");
    let mut bytes = Vec::new();
    {
        let mut writer = npyz::WriteOptions::new()
            .default_dtype()
            .shape(&[2, 2, 3])
            .writer(&mut bytes)
            .begin_nd()
            .unwrap();
        writer.extend(values()).unwrap();
        writer.finish().unwrap();
    }
    bytes.truncate(bytes.len() - 8 * 6);
    std::fs::write(&header_says, &bytes).unwrap();
    let e = ctx.load_npy(&x, &header_says).unwrap_err().message;
    assert!(e.contains("truncated.npy") && e.contains("96 bytes"), "{e}");

    let missing = ctx.load_npy(&x, dir.join("missing.npy")).unwrap_err();
    assert!(missing.message.contains("missing.npy"), "{missing}");

    // A folder cannot be replaced by a saved file.
    let e = ctx.save_npy(&x, &dir).unwrap_err().message;
    assert!(e.contains("save_npy of 'x'"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The bytes of a version 2.0 `.npy` file (a 32-bit header length, for headers of any size):
/// the header dict `header`, padded, then `data`.
fn npy_v2(header: &str, data: &[u8]) -> Vec<u8> {
    let mut text = header.as_bytes().to_vec();
    while !(12 + text.len() + 1).is_multiple_of(64) {
        text.push(b' ');
    }
    text.push(b'\n');
    let mut file = b"\x93NUMPY\x02\x00".to_vec();
    file.extend(u32::try_from(text.len()).unwrap().to_le_bytes());
    file.extend(text);
    file.extend(data);
    file
}

#[test]
fn unsigned_64_bit_values_load_as_the_numbers_they_are() {
    // numpy: np.array([0, 2**63 - 1, 2**63, 2**64 - 1], np.uint64).astype(np.float64).
    let cells = [0, (1u64 << 63) - 1, 1 << 63, u64::MAX];
    let bytes: Vec<u8> = cells.iter().flat_map(|c| c.to_le_bytes()).collect();
    let header = "{'descr': '<u8', 'fortran_order': False, 'shape': (4,), }";
    for backend in backends() {
        let name = backend.name();
        let dir = folder(&format!("uint64-{name}"));
        let path = dir.join("uint64.npy");
        std::fs::write(&path, npy_v2(header, &bytes)).unwrap();
        let graph = Graph::new();
        let wide = graph
            .data("wide")
            .shape("4")
            .precision(Precision::F64)
            .build();
        let ids = graph
            .data("ids")
            .shape("2")
            .precision(Precision::I64)
            .build();
        let mut ctx = context(&graph, backend, &[&wide, &ids]);
        ctx.load_npy(&wide, &path).unwrap();
        assert_eq!(
            ctx.values(&wide).unwrap(),
            [
                0.0,
                9.223372036854776e18,
                9.223372036854776e18,
                1.8446744073709552e19
            ],
            "{name}"
        );
        // Values an i64 holds load into one exactly (2^63 − 1 is not an f64).
        let header = "{'descr': '<u8', 'fortran_order': False, 'shape': (2,), }";
        std::fs::write(&path, npy_v2(header, &bytes[..16])).unwrap();
        ctx.load_npy(&ids, &path).unwrap();
        assert_eq!(
            ctx.cells(&ids).unwrap(),
            [Value::Int(0), Value::Int(i64::MAX)],
            "{name}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn u16_u64_and_fp8_round_trip_through_their_numpy_dtypes() {
    // u64::MAX and 2^63 + 1 as their bits, 65535, and fp8 values (0.1 is held as 0.09375).
    let cases: [(Precision, &str, Vec<Value>); 3] = [
        (
            Precision::U16,
            "'<u2'",
            vec![Value::Int(65535), Value::Int(0), Value::Int(300)],
        ),
        (
            Precision::U64,
            "'<u8'",
            vec![Value::Int(-1), Value::Int(i64::MIN + 1), Value::Int(7)],
        ),
        // numpy has no fp8: its values are float16 values, which the file holds exactly.
        (
            Precision::Fp8,
            "'<f2'",
            vec![
                Value::Float(0.09375),
                Value::Float(-57344.0),
                Value::Float(2f64.powi(-16)),
            ],
        ),
    ];
    for backend in backends() {
        let name = backend.name();
        let dir = folder(&format!("narrow-{name}"));
        let graph = Graph::new();
        let tensors: Vec<Tensor> = (cases.iter())
            .map(|(precision, _, _)| {
                graph
                    .data(&format!("x {precision}"))
                    .shape("3")
                    .precision(*precision)
                    .build()
            })
            .collect();
        let mut ctx = context(&graph, backend, &tensors.iter().collect::<Vec<_>>());
        for ((precision, descr, cells), t) in cases.iter().zip(&tensors) {
            let path = dir.join(format!("{precision}.npy"));
            ctx.set_cells(t, cells).unwrap();
            ctx.save_npy(t, &path).unwrap();
            let file = read_with_npyz(&path);
            assert_eq!(file.dtype().descr(), *descr, "{precision} on {name}");
            ctx.set_cells(t, &[Value::Int(1), Value::Int(1), Value::Int(1)])
                .unwrap();
            ctx.load_npy(t, &path).unwrap();
            assert_eq!(ctx.cells(t).unwrap(), *cells, "{precision} on {name}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn more_than_64_dims_are_refused_quickly() {
    let dir = folder("many-dims");
    let path = dir.join("unit-dims.npy");
    let header = format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': ({}), }}",
        "1, ".repeat(50_000)
    );
    std::fs::write(&path, npy_v2(&header, &1.5f64.to_le_bytes())).unwrap();
    let started = std::time::Instant::now();
    let e = rcannl_tensor::npy::open(&path).unwrap_err();
    assert!(
        e.message.contains("more than 64 dims"),
        "{}",
        &e.message[..e.message.len().min(300)]
    );
    // The message does not repeat the shape's 50,000 dims.
    assert!(e.message.len() < 300, "{} bytes", e.message.len());

    let graph = Graph::new();
    let x = graph.data("x").shape("1").build();
    let mut ctx = context(&graph, Box::new(Interpreter), &[&x]);
    let e = ctx.load_npy(&x, &path).unwrap_err().message;
    assert!(
        e.contains("more than 64 dims") && e.len() < 400,
        "{}",
        &e[..e.len().min(300)]
    );
    assert!(started.elapsed().as_secs() < 5, "{:?}", started.elapsed());

    // 64 dims are read.
    let header = format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': ({}), }}",
        "1, ".repeat(64)
    );
    std::fs::write(&path, npy_v2(&header, &1.5f64.to_le_bytes())).unwrap();
    let reader = rcannl_tensor::npy::open(&path).unwrap();
    assert_eq!(reader.header().dims.len(), 64);
    std::fs::remove_dir_all(&dir).unwrap();
}
