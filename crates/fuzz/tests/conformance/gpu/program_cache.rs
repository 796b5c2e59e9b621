//! Generated programs are kept on disk, keyed by routine, and read back only while they match
//! their record.

use std::path::Path;

use rcannl_gpu::Gpu;
use rcannl_tensor::{BinaryOp, Context, Graph};
use sha2::{Digest, Sha256};

use super::device;

use crate::target::Target;

/// `x * x` for x = 0..4, compiled by a backend keeping programs in `dir`.
fn squares(gpu: &Gpu, dir: &Path) -> Vec<f64> {
    let graph = Graph::new();
    let x = graph.data("x").shape("4").build();
    let y = x.binary(BinaryOp::Mul, &x);
    let mut ctx = Context::with_backend(&graph, Box::new(gpu.clone().with_cache_dir(dir)));
    let forward = ctx.forward(&[&y]).unwrap();
    ctx.set_values(&x, &[0.0, 1.0, 2.0, 3.0]).unwrap();
    ctx.run(&forward).unwrap();
    ctx.values(&y).unwrap()
}

fn kept_program(dir: &Path) -> std::path::PathBuf {
    let programs: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wgsl"))
        .collect();
    assert_eq!(programs.len(), 1, "{programs:?}");
    programs[0].clone()
}

fn programs_are_kept_and_read_back_only_while_they_match_their_record(target: &Target) {
    let gpu = device(target);
    let dir = std::env::temp_dir().join(format!("rcannl-gpu-cache-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(squares(&gpu, &dir), [0.0, 1.0, 4.0, 9.0]);
    let program = kept_program(&dir);
    let text = std::fs::read_to_string(&program).unwrap();
    assert!(text.contains("@compute"), "{text}");

    // A program changed behind its record's back is not read: the routine is generated again.
    let square = "(rc_f32_0[rc_n0_at + (l0)] * rc_f32_0[rc_n0_at + (l0)])";
    let planted = text.replace(square, &square.replace('*', "+"));
    assert_ne!(planted, text);
    std::fs::write(&program, &planted).unwrap();
    assert_eq!(squares(&gpu, &dir), [0.0, 1.0, 4.0, 9.0]);

    // A program that matches its record is read instead of generating one (the change shows).
    std::fs::write(&program, &planted).unwrap();
    let name = program.file_name().unwrap().to_str().unwrap();
    let record = format!("{:x}  {name}\n", Sha256::digest(planted.as_bytes()));
    std::fs::write(dir.join(format!("{name}.sha256")), record).unwrap();
    assert_eq!(squares(&gpu, &dir), [0.0, 2.0, 4.0, 6.0]);
    std::fs::remove_dir_all(&dir).unwrap();
}
conformance!(programs_are_kept_and_read_back_only_while_they_match_their_record: gpu);
