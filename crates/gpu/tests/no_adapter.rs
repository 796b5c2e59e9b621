//! Without any adapter the backend is an error saying what was looked for, never a panic.

use std::process::Command;

/// Set in the child process this test starts, which sees no Vulkan driver.
const CHILD: &str = "RCANNL_TEST_NO_ADAPTER_CHILD";

#[test]
fn no_adapter_is_an_error_naming_what_was_looked_for() {
    if std::env::var_os(CHILD).is_some() {
        let e = rcannl_gpu::Gpu::new().unwrap_err();
        assert!(e.message.contains("no GPU adapter found"), "{e}");
        assert!(e.message.contains("Vulkan"), "{e}");
        assert!(e.message.contains("mesa-vulkan-drivers"), "{e}");
        return;
    }
    // The Vulkan loader reads its drivers from these variables: pointing them at nothing hides
    // every driver (there is no Metal or DX12 here).
    let missing = std::env::temp_dir().join("rcannl-no-such-icd.json");
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "no_adapter_is_an_error_naming_what_was_looked_for",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .env("VK_DRIVER_FILES", &missing)
        .env("VK_ICD_FILENAMES", &missing)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
