//! Checkpoints restored by tensor id (`load_by_id`, `load_params_by_id`): a model rebuilt under
//! other labels, or under labels that repeat, takes the saved values and computes the saved
//! loss; an id the file lacks or records twice, dims or a precision that differ, a tensor asked
//! for twice and a file saved before ids were recorded are refused with errors naming the
//! tensors, and change nothing in memory. Such a file still loads by label, and an id changed
//! in a file fails its tensor's checksum, whichever way the file is loaded.

use std::fs;
use std::path::Path;

use rcannl_ir::Precision;
use rcannl_nn::blocks::Dense;
use rcannl_nn::checkpoint::{
    append, load, load_by_id, load_params, load_params_by_id, save, save_params,
};
use rcannl_nn::loss::mean;
use rcannl_tensor::{Context, Graph, Tensor};

use crate::checkpoint::{bits, fnv1a64, folder, header, loss_bits, one_at_a_time, reseal};

/// Two dense layers labelled `names`, of widths `widths` and parameters of `precision`, on data
/// of shape `4|->5`, and the mean squared error of their output against fixed targets.
struct Net {
    graph: Graph,
    loss: Tensor,
    params: Vec<Tensor>,
}

impl Net {
    fn new(names: [&str; 2], widths: [usize; 2], precision: Precision) -> Net {
        let graph = Graph::new();
        let x = graph
            .data("x")
            .shape("4|->5")
            .values((0..20).map(|i| f64::from(i % 7) / 3.0 - 1.0).collect())
            .build();
        let target = graph
            .data("target")
            .shape(&format!("4|->{}", widths[1]))
            .values((0..4 * widths[1]).map(|i| f64::from(i as u8 % 3)).collect())
            .build();
        let first = Dense::with_precision(&graph, names[0], widths[0], precision);
        let second = Dense::with_precision(&graph, names[1], widths[1], precision);
        let y = second.apply(&first.apply(&x).relu());
        let error = &y - &target;
        Net {
            loss: mean(&error.pmul(&error)),
            params: [first.params(), second.params()].concat(),
            graph,
        }
    }

    fn params(&self) -> Vec<&Tensor> {
        self.params.iter().collect()
    }

    /// A context of the net with its parameters drawn from `seed` and its loss computed.
    fn context(&self, seed: u64) -> Context {
        let mut ctx = Context::new(&self.graph);
        ctx.set_seed(seed);
        ctx.init_params().expect("init");
        let forward = ctx.forward(&[&self.loss]).expect("forward");
        ctx.run(&forward).expect("forward runs");
        ctx
    }
}

/// The net saved by `save_params` at `path`, from seed 1, labelled `enc` and `head`.
fn saved(path: &Path) -> (Net, Context) {
    let net = Net::new(["enc", "head"], [6, 3], Precision::F32);
    let mut ctx = net.context(1);
    save_params(path, &mut ctx, &net.graph).expect("save");
    (net, ctx)
}

#[test]
fn the_file_records_each_tensors_id() {
    let _turn = one_at_a_time();
    let path = folder("ids-recorded").join("model.safetensors");
    let (net, _) = saved(&path);
    let text = header(&path);
    for p in &net.params {
        let entry = format!("\"id:{}\":\"{}\"", p.label(), p.id());
        assert!(text.contains(&entry), "{entry} not in {text}");
    }
    // Ids count the graph's tensors from 0 in the order they were made: `x`, `target`, then
    // the first layer's weight.
    assert_eq!(net.params[0].id(), 2);
    let ids: Vec<usize> = net.params.iter().map(Tensor::id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
}

#[test]
fn a_model_rebuilt_under_other_labels_restores_by_id() {
    let _turn = one_at_a_time();
    let path = folder("by-id").join("model.safetensors");
    let (net, ctx) = saved(&path);

    // Both layers labelled alike: loading by label cannot tell their tensors apart.
    let alike = Net::new(["layer", "layer"], [6, 3], Precision::F32);
    let mut restored = alike.context(2);
    assert_ne!(bits(&restored, &alike.params()), bits(&ctx, &net.params()));
    let e = load_params(&path, &mut restored, &alike.graph).expect_err("repeated labels");
    assert!(
        e.message.contains("two tensors are labelled 'layer.w'"),
        "{e}"
    );
    load_params_by_id(&path, &mut restored, &alike.graph).expect("load by id");
    assert_eq!(bits(&restored, &alike.params()), bits(&ctx, &net.params()));
    let forward = restored.forward(&[&alike.loss]).expect("forward");
    restored.run(&forward).expect("forward runs");
    assert_eq!(
        loss_bits(&restored, &alike.loss),
        loss_bits(&ctx, &net.loss)
    );

    // Renamed layers, the tensors asked for one by one in another order.
    let renamed = Net::new(["first", "second"], [6, 3], Precision::F32);
    let mut restored = renamed.context(3);
    let e = load(&path, &mut restored, &renamed.params()).expect_err("other labels");
    assert!(e.message.contains("no tensor 'first.w'"), "{e}");
    let mut reversed = renamed.params();
    reversed.reverse();
    load_by_id(&path, &mut restored, &reversed).expect("load by id");
    assert_eq!(
        bits(&restored, &renamed.params()),
        bits(&ctx, &net.params())
    );
}

/// Loading `tensors` of `ctx` by id from `path` fails with a message naming the file and
/// containing each of `expected`, and changes no value.
fn refused(path: &Path, ctx: &mut Context, tensors: &[&Tensor], expected: &[&str]) {
    let before = bits(ctx, tensors);
    let e = load_by_id(path, ctx, tensors).expect_err("the load fails");
    for part in expected {
        assert!(e.message.contains(part), "{part:?} not in {:?}", e.message);
    }
    assert!(
        e.message.contains(&path.display().to_string()),
        "{}",
        e.message
    );
    assert_eq!(bits(ctx, tensors), before);
}

#[test]
fn ids_that_do_not_match_are_refused_naming_the_tensor() {
    let _turn = one_at_a_time();
    let path = folder("by-id-refused").join("model.safetensors");
    saved(&path);

    // Another width: the same ids, other dims.
    let wider = Net::new(["layer", "layer"], [7, 3], Precision::F32);
    let mut ctx = wider.context(2);
    let w = &wider.params[0];
    let expected = format!(
        "tensor 'layer.w' (id {}, saved as 'enc.w') has dims",
        w.id()
    );
    refused(&path, &mut ctx, &wider.params(), &[&expected, "in memory"]);

    // Another precision.
    let double = Net::new(["enc", "head"], [6, 3], Precision::F64);
    let mut ctx = double.context(2);
    let expected = format!("tensor 'enc.w' (id {}) is F32", double.params[0].id());
    refused(
        &path,
        &mut ctx,
        &double.params(),
        &[&expected, "(precision f64)"],
    );

    // A tensor made after the model: its id is none of the file's.
    let net = Net::new(["enc", "head"], [6, 3], Precision::F32);
    let extra = net
        .graph
        .data("extra")
        .shape("3")
        .values(vec![0.0; 3])
        .build();
    let mut ctx = net.context(2);
    let mut tensors = net.params();
    tensors.push(&extra);
    let expected = format!(
        "tensor 'extra' (id {0}): no tensor of id {0} in the file (it records id 2 for 'enc.w'",
        extra.id()
    );
    refused(&path, &mut ctx, &tensors, &[&expected]);

    // One tensor twice.
    let twice = [&net.params[0], &net.params[1], &net.params[0]];
    let expected = format!("tensor 'enc.w' (id {}) is asked for twice", twice[0].id());
    refused(&path, &mut ctx, &twice, &[&expected]);
}

/// `a` (f32) and `b` (f64) of a fresh graph, saved at `path`, and a context holding other
/// values.
fn pair(path: &Path) -> (Vec<Tensor>, Context) {
    let graph = Graph::new();
    let a = graph.data("a").shape("3").build();
    let b = graph.data("b").shape("2").precision(Precision::F64).build();
    let mut ctx = Context::new(&graph);
    ctx.set_values(&a, &[1.5, -2.25, 0.125]).expect("values");
    ctx.set_values(&b, &[0.5, -8.0]).expect("values");
    save(path, &mut ctx, &[&a, &b]).expect("save");
    ctx.set_values(&a, &[0.0; 3]).expect("values");
    ctx.set_values(&b, &[0.0; 2]).expect("values");
    (vec![a, b], ctx)
}

#[test]
fn a_checkpoint_saved_before_ids_were_recorded_loads_by_label_only() {
    let _turn = one_at_a_time();
    let dir = folder("no-ids");
    let path = dir.join("pair.safetensors");
    let (tensors, mut ctx) = pair(&path);
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    // The header as a version recording no ids wrote it: each id entry blanked out (JSON
    // allows the spaces), each tensor's checksum that of its bytes alone, and the header
    // checksum recomputed.
    let mut bytes = fs::read(&path).expect("read");
    let find = |bytes: &[u8], text: &str| {
        bytes
            .windows(text.len())
            .position(|w| w == text.as_bytes())
            .unwrap_or_else(|| panic!("{text} in the header"))
    };
    for entry in [",\"id:a\":\"0\"", ",\"id:b\":\"1\""] {
        let at = find(&bytes, entry);
        bytes[at..at + entry.len()].fill(b' ');
    }
    let a: Vec<u8> = [1.5f32, -2.25, 0.125]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let b: Vec<u8> = [0.5f64, -8.0]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    for (label, cells) in [("a", a), ("b", b)] {
        let key = format!("\"checksum:{label}\":\"");
        let at = find(&bytes, &key) + key.len();
        let checksum = fnv1a64(cells);
        bytes[at..at + checksum.len()].copy_from_slice(checksum.as_bytes());
    }
    reseal(&mut bytes);
    let old = dir.join("old.safetensors");
    fs::write(&old, &bytes).expect("write");
    refused(&old, &mut ctx, &tensors, &["records no tensor ids"]);
    load(&old, &mut ctx, &tensors).expect("load by label");
    assert_eq!(ctx.values(tensors[0]).unwrap(), [1.5, -2.25, 0.125]);
    assert_eq!(ctx.values(tensors[1]).unwrap(), [0.5, -8.0]);
}

#[test]
fn appending_keeps_ids_and_an_id_recorded_twice_is_refused() {
    let _turn = one_at_a_time();
    let path = folder("append-ids").join("pair.safetensors");
    let (tensors, mut ctx) = pair(&path);
    let (a, b) = (&tensors[0], &tensors[1]);

    // `c` of another graph takes id 0, `a`'s: both entries are kept, by label.
    let other = Graph::new();
    let c = other.data("c").shape("1").values(vec![7.0]).build();
    let mut other_ctx = Context::new(&other);
    other_ctx.set_values(&c, &[7.0]).expect("values");
    append(&path, &mut other_ctx, &[&c]).expect("append");
    assert_eq!((a.id(), c.id()), (0, 0));

    // `b`'s id is recorded once: it restores; `a`'s and `c`'s is recorded twice: refused.
    load_by_id(&path, &mut ctx, &[b]).expect("load by id");
    assert_eq!(ctx.values(b).unwrap(), [0.5, -8.0]);
    refused(
        &path,
        &mut ctx,
        &[a],
        &["tensor 'a' (id 0): the file records id 0 for 'a' and 'c'"],
    );
    other_ctx.set_values(&c, &[0.0]).expect("values");
    refused(
        &path,
        &mut other_ctx,
        &[&c],
        &["records id 0 for 'a' and 'c'"],
    );
    load(&path, &mut other_ctx, &[&c]).expect("load by label");
    assert_eq!(other_ctx.values(&c).unwrap(), [7.0]);

    // Appending `c` again under the id of a tensor the file holds once replaces `c` by label and
    // keeps `b`'s id.
    let third = Graph::new();
    let _zero = third.data("zero").shape("1").values(vec![0.0]).build();
    let c = third.data("c").shape("1").values(vec![9.0]).build();
    let mut third_ctx = Context::new(&third);
    third_ctx.set_values(&c, &[9.0]).expect("values");
    append(&path, &mut third_ctx, &[&c]).expect("append");
    assert_eq!(c.id(), 1);
    refused(&path, &mut ctx, &[b], &["records id 1 for 'b' and 'c'"]);
    load_by_id(&path, &mut ctx, &[a]).expect("id 0 is `a`'s alone again");
    assert_eq!(ctx.values(a).unwrap(), [1.5, -2.25, 0.125]);
}

#[test]
fn a_changed_id_is_refused_by_every_load() {
    let _turn = one_at_a_time();
    let dir = folder("changed-id");
    let path = dir.join("pair.safetensors");
    let (tensors, mut ctx) = pair(&path);
    let tensors: Vec<&Tensor> = tensors.iter().collect();
    // `b`'s id 1 becomes 3, with the header checksum recomputed: `b`'s checksum, which covers
    // its id, no longer matches.
    let mut bytes = fs::read(&path).expect("read");
    let entry = "\"id:b\":\"1\"";
    let at = bytes
        .windows(entry.len())
        .position(|w| w == entry.as_bytes())
        .expect("b's id in the header");
    bytes[at + entry.len() - 2] = b'3';
    reseal(&mut bytes);
    let changed = dir.join("changed.safetensors");
    fs::write(&changed, &bytes).expect("write");
    let expected = "tensor 'b' has bytes and id whose checksum";
    refused(&changed, &mut ctx, &tensors, &[expected]);
    let before = bits(&ctx, &tensors);
    let e = load(&changed, &mut ctx, &tensors).expect_err("by label too");
    assert!(e.message.contains(expected), "{e}");
    assert_eq!(bits(&ctx, &tensors), before);
}
