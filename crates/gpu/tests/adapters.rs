//! Choosing among adapters: the list, a search by name whose failure lists what was found, a
//! device of its own on a chosen adapter beside the shared one, and `RCANNL_GPU_ADAPTER`
//! choosing the shared device's adapter (checked in child processes of this binary, which set
//! it).
//!
//! Without an adapter, the tests that need one say so in one line and pass, unless
//! `RCANNL_REQUIRE_GPU` is set, which makes the missing device a failure.

use std::process::Command;
use std::sync::Arc;

use rcannl_gpu::{Adapter, Device, Gpu, GpuErrorKind, device::ADAPTER_VARIABLE};

/// Set in a child process: the adapter name it expects the variable to choose (empty: none).
const CHILD: &str = "RCANNL_TEST_ADAPTER_CHILD";

/// A name no adapter has.
const NO_SUCH: &str = "no-such-adapter-7f3a";

/// Every adapter, or `None` after one line saying the tests did not run, where there is none
/// (a failure where `RCANNL_REQUIRE_GPU` is set).
fn adapters() -> Option<Vec<Adapter>> {
    let all = Adapter::all();
    if all.is_empty() {
        assert!(
            std::env::var_os("RCANNL_REQUIRE_GPU").is_none(),
            "RCANNL_REQUIRE_GPU is set but there is no GPU adapter"
        );
        eprintln!("the GPU adapter tests did not run: no GPU adapter found");
        return None;
    }
    Some(all)
}

#[test]
fn a_name_no_adapter_has_is_an_error_listing_the_adapters_found() {
    let e = Adapter::find(NO_SUCH).unwrap_err();
    assert_eq!(e.kind, GpuErrorKind::NoDevice);
    assert!(e.message.contains(NO_SUCH), "{e}");
    let all = Adapter::all();
    if all.is_empty() {
        assert!(e.message.contains("the adapters found: none"), "{e}");
    }
    for adapter in &all {
        assert!(e.message.contains(adapter.name()), "{e}");
    }
}

#[test]
fn every_adapter_opens_a_device_of_its_own_beside_the_shared_one() {
    let Some(all) = adapters() else {
        return;
    };
    assert_eq!(Adapter::find("  ").unwrap().describe(), all[0].describe());
    let shared = Device::shared().unwrap();
    for adapter in &all {
        let upper = adapter.name().to_uppercase();
        let found = Adapter::find(&upper).unwrap();
        assert!(found.name().to_uppercase().contains(&upper), "{upper}");
        let device = Device::open(adapter).unwrap();
        assert_eq!(device.describe(), adapter.describe());
        assert!(!Arc::ptr_eq(&device, &shared));
        let gpu = Gpu::on(Arc::clone(&device));
        assert!(Arc::ptr_eq(gpu.device(), &device));
        assert!(!Arc::ptr_eq(Gpu::new().unwrap().device(), &device));
    }
}

#[test]
fn the_variable_chooses_the_shared_devices_adapter() {
    if let Some(expected) = std::env::var_os(CHILD) {
        let expected = expected.to_str().unwrap();
        match Gpu::new() {
            Ok(gpu) => assert!(gpu.device().describe().contains(expected), "{expected}"),
            Err(e) => {
                assert!(expected.is_empty(), "{e}");
                assert!(
                    e.message.contains(&format!(
                        "no GPU adapter's name contains {ADAPTER_VARIABLE}"
                    )),
                    "{e}"
                );
            }
        }
        return;
    }
    let mut cases = vec![(NO_SUCH.to_owned(), String::new())];
    if let Some(all) = adapters() {
        // The worst adapter's name, in lower case: the best adapter whose name contains it.
        let wanted = all[all.len() - 1].name().to_lowercase();
        let expected = all
            .iter()
            .find(|a| a.name().to_lowercase().contains(&wanted))
            .unwrap();
        cases.push((wanted, expected.name().to_owned()));
    }
    for (wanted, expected) in cases {
        let output = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "the_variable_chooses_the_shared_devices_adapter",
                "--nocapture",
            ])
            .env(CHILD, &expected)
            .env(ADAPTER_VARIABLE, &wanted)
            .output()
            .unwrap();
        assert!(
            output.status.success(),
            "{ADAPTER_VARIABLE}={wanted}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }
}
