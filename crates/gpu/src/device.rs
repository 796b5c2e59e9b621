//! The device: the adapters wgpu finds ([`Adapter::all`], a discrete GPU before an integrated
//! one, before a virtual one, before a CPU implementation such as lavapipe), and the process's
//! shared device ([`Device::shared`]: the best adapter, among those whose name contains
//! `RCANNL_GPU_ADAPTER` where it is set), opened once per process and shared by every GPU backend
//! made by `Gpu::new`; a device of its own opens on any adapter ([`Device::open`]), for several
//! devices side by side in one process. A device keeps its compiled pipelines (each WGSL source
//! compiled once; where the adapter offers a pipeline cache, the driver's compiled code is kept on
//! disk between runs, in the C backend's private cache folder, checked against its record before
//! use) and the errors it reports.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use rcannl_backends::{cache, settings};

use crate::wgsl::{DeviceFeatures, Program};

/// What kind of problem the GPU reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GpuErrorKind {
    /// No adapter was found, or the one found would not open a device.
    NoDevice,
    /// The device refused a kernel (its shader compiler failed).
    Kernel,
    /// The device reported an error while working: out of memory, validation, lost.
    Device,
}

/// Why the GPU backend cannot be used, or a routine cannot run on it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuError {
    /// What kind of problem it is.
    pub kind: GpuErrorKind,
    /// What failed, in words (what `Display` prints): no adapter found (and what was looked for),
    /// a device that would not open, or an error the device reported.
    pub message: String,
}

impl std::fmt::Display for GpuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for GpuError {}

pub(crate) fn gpu_error(kind: GpuErrorKind, message: String) -> GpuError {
    GpuError { kind, message }
}

/// A compiled kernel: its pipeline and the layout of what it binds.
#[derive(Debug)]
pub(crate) struct Pipeline {
    pub(crate) pipeline: wgpu::ComputePipeline,
    pub(crate) layout: wgpu::BindGroupLayout,
}

/// A GPU device: the process's shared one, or one opened on a chosen adapter.
#[derive(Debug)]
pub struct Device {
    pub(crate) device: wgpu::Device,
    pub(crate) queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    pub(crate) features: DeviceFeatures,
    pub(crate) limits: wgpu::Limits,
    /// The most bytes of one arena: what the adapter binds at once (see [`Device::arena_bytes`]).
    arena_bytes: u64,
    /// Errors the device reported outside an error scope, not yet returned to a caller.
    errors: Arc<Mutex<Vec<String>>>,
    pipelines: Mutex<HashMap<String, Arc<Pipeline>>>,
    /// The driver's pipeline cache and the name it is kept under, where the adapter has one.
    pipeline_cache: Option<(wgpu::PipelineCache, String)>,
    /// Whether pipelines were compiled since the pipeline cache was last kept.
    unsaved: AtomicBool,
}

/// The environment variable choosing the shared device's adapter: the best one whose name
/// contains its value, ignoring case.
pub const ADAPTER_VARIABLE: &str = "RCANNL_GPU_ADAPTER";

/// The backends searched for an adapter.
const BACKENDS: wgpu::Backends = wgpu::Backends::VULKAN
    .union(wgpu::Backends::METAL)
    .union(wgpu::Backends::DX12);

/// Better adapters first.
fn rank(device_type: wgpu::DeviceType) -> u8 {
    match device_type {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

/// An adapter wgpu found, which [`Device::open`] opens a device on.
#[derive(Debug, Clone)]
pub struct Adapter {
    adapter: wgpu::Adapter,
    info: wgpu::AdapterInfo,
}

impl Adapter {
    /// Every adapter wgpu finds through Vulkan, Metal and DX12, best first: discrete GPUs, then
    /// integrated ones, virtual ones, and CPU implementations such as lavapipe.
    pub fn all() -> Vec<Adapter> {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: BACKENDS,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let mut adapters: Vec<Adapter> = pollster::block_on(instance.enumerate_adapters(BACKENDS))
            .into_iter()
            .map(|adapter| Adapter {
                info: adapter.get_info(),
                adapter,
            })
            .collect();
        adapters.sort_by_key(|a| rank(a.info.device_type));
        adapters
    }

    /// The best adapter whose name contains `wanted`, ignoring case (the best of all where
    /// `wanted` is blank), as `RCANNL_GPU_ADAPTER` chooses the shared device's; the error lists
    /// the adapters found.
    pub fn find(wanted: &str) -> Result<Adapter, GpuError> {
        choose(Adapter::all(), wanted, &format!("{wanted:?}"))
    }

    /// The adapter's name, as the driver gives it.
    pub fn name(&self) -> &str {
        &self.info.name
    }

    /// The adapter, its API and its driver, for reports.
    pub fn describe(&self) -> String {
        describe(&self.info)
    }
}

/// The best of `adapters` (sorted best first) whose name contains `wanted` (all, where it is
/// blank), `asked` saying what asked for it in the error.
fn choose(mut adapters: Vec<Adapter>, wanted: &str, asked: &str) -> Result<Adapter, GpuError> {
    let wanted = wanted.trim().to_lowercase();
    if !wanted.is_empty() {
        let names: Vec<&str> = adapters.iter().map(Adapter::name).collect();
        let found = if names.is_empty() {
            "none".to_owned()
        } else {
            names.join(", ")
        };
        adapters.retain(|a| a.info.name.to_lowercase().contains(&wanted));
        if adapters.is_empty() {
            return Err(gpu_error(
                GpuErrorKind::NoDevice,
                format!("no GPU adapter's name contains {asked}; the adapters found: {found}"),
            ));
        }
    }
    adapters.into_iter().next().ok_or_else(|| {
        gpu_error(
            GpuErrorKind::NoDevice,
            "no GPU adapter found: looked for Vulkan, Metal and DX12 adapters through wgpu. \
             On Linux, install a Vulkan driver (Debian and Ubuntu: the package \
             mesa-vulkan-drivers, which also runs on the CPU) and the Vulkan loader \
             (libvulkan1)"
                .to_owned(),
        )
    })
}

impl Device {
    /// The process's shared device, opened on first use on the adapter `RCANNL_GPU_ADAPTER`
    /// chooses (see [`Adapter::find`]), else on the best one; the same error on every call when
    /// there is none.
    pub fn shared() -> Result<Arc<Device>, GpuError> {
        static DEVICE: OnceLock<Result<Arc<Device>, GpuError>> = OnceLock::new();
        DEVICE
            .get_or_init(|| {
                let wanted = settings::text_or_warn(&settings::GPU_ADAPTER).unwrap_or_default();
                let asked = format!("{ADAPTER_VARIABLE}={wanted}");
                choose(Adapter::all(), &wanted, &asked).and_then(|a| Device::open(&a))
            })
            .clone()
    }

    /// A device of its own on `adapter`, beside the shared one and any other: a GPU backend on
    /// it (`Gpu::on`) keeps its tensors and pipelines apart from every other device's.
    pub fn open(adapter: &Adapter) -> Result<Arc<Device>, GpuError> {
        let Adapter { adapter, info } = adapter;
        let offered = adapter.features();
        let f16 = offered.contains(wgpu::Features::SHADER_F16);
        let int64 = offered.contains(wgpu::Features::SHADER_INT64);
        // f64 through Vulkan only: the prelude's f64 functions take square roots, floors and
        // fused multiply-adds of f64, which SPIR-V has and D3D's double operations lack.
        let f64 =
            offered.contains(wgpu::Features::SHADER_F64) && info.backend == wgpu::Backend::Vulkan;
        let mut required_features = offered
            & (wgpu::Features::SHADER_F16
                | wgpu::Features::SHADER_INT64
                | wgpu::Features::PIPELINE_CACHE);
        if f64 {
            required_features |= wgpu::Features::SHADER_F64;
        }
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("rcannl"),
            required_features,
            required_limits: limits.clone(),
            memory_hints: wgpu::MemoryHints::Performance,
            ..Default::default()
        }))
        .map_err(|e| {
            gpu_error(
                GpuErrorKind::NoDevice,
                format!(
                    "the GPU adapter {} ({:?}) would not open a device: {e}",
                    info.name, info.backend
                ),
            )
        })?;
        let errors: Arc<Mutex<Vec<String>>> = Arc::default();
        let sink = Arc::clone(&errors);
        device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(e.to_string());
        }));
        let pipeline_cache = if required_features.contains(wgpu::Features::PIPELINE_CACHE) {
            wgpu::util::pipeline_cache_key(info).map(|key| {
                let name = format!("gpu_{key}.bin");
                let kept = cache::read_kept(&cache::default_folder(), &name);
                // SAFETY: the data, if any, is what `get_data` gave on an adapter with the same
                // pipeline cache key (the name it is kept under), read back from a private
                // folder after matching its record; the driver checks its header too.
                let cache = unsafe {
                    device.create_pipeline_cache(&wgpu::PipelineCacheDescriptor {
                        label: Some("rcannl pipelines"),
                        data: kept.as_deref(),
                        fallback: true,
                    })
                };
                (cache, name)
            })
        } else {
            None
        };
        let arena_bytes = arena_bytes(&limits);
        Ok(Arc::new(Device {
            device,
            queue,
            info: info.clone(),
            features: DeviceFeatures { f16, int64, f64 },
            limits,
            arena_bytes,
            errors,
            pipelines: Mutex::default(),
            pipeline_cache,
            unsaved: AtomicBool::new(false),
        }))
    }

    /// The adapter, its API and its driver, for reports.
    pub fn describe(&self) -> String {
        describe(&self.info)
    }

    /// The most bytes one arena (one storage buffer) holds: the adapter's limits on a buffer and
    /// on a binding, below 2 GiB (kernels address cells with 32-bit integers), lowered by
    /// `RCANNL_GPU_ARENA_BYTES` where set (to try models spread over many arenas).
    pub fn arena_bytes(&self) -> u64 {
        self.arena_bytes
    }

    /// Whether the device holds f16 cells.
    pub fn has_f16(&self) -> bool {
        self.features.f16
    }

    /// What the device offers that code generation depends on.
    pub fn features(&self) -> DeviceFeatures {
        self.features
    }

    /// The errors the device reported since the last call, as one error.
    pub(crate) fn take_errors(&self, doing: &str) -> Result<(), GpuError> {
        let errors = std::mem::take(&mut *self.errors.lock().unwrap_or_else(|p| p.into_inner()));
        if errors.is_empty() {
            Ok(())
        } else {
            Err(gpu_error(
                GpuErrorKind::Device,
                format!("the GPU failed {doing}: {}", errors.join("; ")),
            ))
        }
    }

    /// The pipeline of the WGSL module `source` (entry point `main`), compiled on first use.
    pub(crate) fn pipeline(&self, source: &str) -> Result<Arc<Pipeline>, GpuError> {
        if let Some(p) = self
            .pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(source)
        {
            return Ok(Arc::clone(p));
        }
        let scope = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("rcannl kernel"),
                source: wgpu::ShaderSource::Wgsl(Cow::Owned(source.to_owned())),
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("rcannl kernel"),
                layout: None,
                module: &module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions::default(),
                cache: self.pipeline_cache.as_ref().map(|(cache, _)| cache),
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(gpu_error(
                GpuErrorKind::Kernel,
                format!(
                    "the GPU would not compile a kernel: {}",
                    brief(&e.to_string())
                ),
            ));
        }
        self.unsaved.store(true, Ordering::Relaxed);
        let layout = pipeline.get_bind_group_layout(0);
        let compiled = Arc::new(Pipeline { pipeline, layout });
        self.pipelines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(source.to_owned(), Arc::clone(&compiled));
        Ok(compiled)
    }

    /// The pipelines of every kernel of `program`, in order; a kernel the driver refuses is
    /// named by its position.
    pub(crate) fn pipelines(&self, program: &Program) -> Result<Vec<Arc<Pipeline>>, GpuError> {
        let pipelines = program
            .kernels
            .iter()
            .enumerate()
            .map(|(i, k)| {
                self.pipeline(&k.source).map_err(|mut e| {
                    e.message = format!(
                        "kernel {i}: {}\n(see the kernels with `rcannl explain --backend gpu`, \
                         or set {}=FOLDER to have every routine's kernels written there)",
                        e.message,
                        crate::backend::SOURCE_FOLDER
                    );
                    e
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.keep_pipelines();
        Ok(pipelines)
    }

    /// Keeps the driver's pipeline cache on disk if pipelines were compiled since it was last
    /// kept; a folder that cannot keep it only costs compiling them again in a later run.
    fn keep_pipelines(&self) {
        if let Some((cache, name)) = &self.pipeline_cache
            && self.unsaved.swap(false, Ordering::Relaxed)
            && let Some(data) = cache.get_data()
        {
            let _ = cache::keep(&cache::default_folder(), name, &data);
        }
    }
}

/// The most bytes of one arena on a device of `limits` (see [`Device::arena_bytes`]).
fn arena_bytes(limits: &wgpu::Limits) -> u64 {
    let adapter = limits
        .max_storage_buffer_binding_size
        .min(limits.max_buffer_size)
        .min(i32::MAX as u64);
    let asked = settings::text_or_warn(&settings::GPU_ARENA_BYTES)
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(u64::MAX);
    (adapter.min(asked) / 16 * 16).max(16)
}

/// An adapter, its API and its driver, for reports.
fn describe(info: &wgpu::AdapterInfo) -> String {
    let driver = [info.driver.as_str(), info.driver_info.as_str()]
        .iter()
        .filter(|s| !s.is_empty())
        .copied()
        .collect::<Vec<_>>()
        .join(" ");
    format!(
        "{} ({:?}, {:?}{})",
        info.name,
        info.device_type,
        info.backend,
        if driver.is_empty() {
            String::new()
        } else {
            format!(", driver {driver}")
        }
    )
}

/// The first lines of a driver's message, which can quote a whole kernel.
fn brief(message: &str) -> String {
    const LINES: usize = 8;
    let lines: Vec<&str> = message.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut kept = lines[..lines.len().min(LINES)].join("\n");
    if lines.len() > LINES {
        kept.push_str("\n…");
    }
    kept
}
