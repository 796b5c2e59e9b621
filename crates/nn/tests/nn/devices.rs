//! Data-parallel training across devices of one process, the interpreter and the C backend
//! standing for two or three devices: each device's shard of every batch, gradients averaged on
//! the host, trains as one device does on whole batches; shards that do not split evenly and a
//! run of no device are refused.

use rcannl_backends::Interpreter;
use rcannl_backends::cc::Compiler;
use rcannl_ir::Precision;
use rcannl_nn::devices::{Shuffle, fit_on_devices, shards};
use rcannl_nn::train::Plan;
use rcannl_tensor::Graph;

use crate::support::check_data_parallel;

fn cc() -> Box<Compiler> {
    Box::new(Compiler::find().expect("a C compiler (cc or $CC)"))
}

#[test]
fn the_interpreter_and_the_c_backend_train_as_one_device_on_whole_batches() {
    check_data_parallel(
        vec![Box::new(Interpreter), cc()],
        cc(),
        Precision::F64,
        1e-9,
    );
}

#[test]
fn three_devices_train_as_one_on_whole_batches() {
    check_data_parallel(
        vec![cc(), Box::new(Interpreter), cc()],
        Box::new(Interpreter),
        Precision::F64,
        1e-9,
    );
}

#[test]
fn shards_split_every_batch_evenly_or_not_at_all() {
    // Two batches of four one-value rows.
    let rows: Vec<f64> = (0..8).map(f64::from).collect();
    assert_eq!(
        shards(&rows, 2, 4, 1, 2).unwrap(),
        [vec![0.0, 1.0, 4.0, 5.0], vec![2.0, 3.0, 6.0, 7.0]]
    );
    let uneven = shards(&rows, 2, 4, 1, 3).unwrap_err();
    assert!(
        uneven
            .message
            .contains("do not split evenly among 3 devices"),
        "{uneven}"
    );
    let none = shards(&rows, 2, 4, 1, 0).unwrap_err();
    assert!(none.message.contains("among 0 devices"), "{none}");
    let short = shards(&rows[1..], 2, 4, 1, 2).unwrap_err();
    assert!(
        short.message.contains("7 values are not 2 batches"),
        "{short}"
    );
}

#[test]
fn a_run_on_no_device_is_an_error() {
    let graph = Graph::new();
    let loss = graph.param("p").shape("1").values(vec![1.0]).build();
    let plan = Plan {
        epochs: 1,
        batches: 1,
        batch_size: 1,
        progress: false,
    };
    let error = fit_on_devices(
        &mut [],
        &loss,
        &[],
        graph.static_index(),
        plan,
        Shuffle::default(),
        |_, _| Ok(()),
    )
    .unwrap_err();
    assert!(error.message.contains("no replica"), "{error}");
}
