//! The GPU as a [`Backend`]: a routine compiles to WGSL kernels whose pipelines are built once,
//! and runs by uploading what the host wrote since the device last saw it, dispatching every
//! kernel in one submission, and recording what the device wrote (read back only when the host
//! asks for it).
//!
//! A routine whose kept values the device holds but which computes inside in a precision the
//! device lacks — parameter initialization, computed in f64 so that every backend draws the same
//! values bit for bit — runs on the host (the C backend, else the interpreter), over the same
//! buffers.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rcannl_backends::emit::{CodegenError, CodegenErrorKind};
use rcannl_backends::error::{check_buffer, static_values};
use rcannl_backends::{
    Backend, Buffers, CompileError, CompileErrorKind, Executable, RunError, RunErrorKind,
    default_backend,
};
use rcannl_ir::{Kind, MemoryMode, NodeId, Routine, Stmt, Symbol};

use crate::cache;
use crate::device::{Device, GpuError, Pipeline};
use crate::kernel::{computes_f64, computes_int64, spill_precision};
use crate::memory::DeviceMemory;
use crate::wgsl::{Class, Placement, Program, check_precisions, generate, holds};
use rcannl_backends::{settings, traffic};

/// The GPU backend.
#[derive(Debug, Clone)]
pub struct Gpu {
    device: Arc<Device>,
    cache_dir: PathBuf,
}

impl Gpu {
    /// The backend on the process's shared device, keeping generated programs in the C backend's
    /// cache folder (`$RCANNL_CACHE_DIR`, …); an error says what was looked for when there is no
    /// device.
    pub fn new() -> Result<Gpu, GpuError> {
        Ok(Gpu::on(Device::shared()?))
    }

    /// The backend on `device` (one opened on a chosen adapter, say: [`Device::open`]), keeping
    /// generated programs where [`Gpu::new`]'s are.
    pub fn on(device: Arc<Device>) -> Gpu {
        Gpu {
            device,
            cache_dir: rcannl_backends::cache::default_folder(),
        }
    }

    /// The backend keeping generated programs in `dir` instead.
    pub fn with_cache_dir(mut self, dir: &Path) -> Gpu {
        self.cache_dir = dir.to_owned();
        self
    }

    /// The device the backend runs on: the process's shared one, or the one it was made on.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
}

/// An error the device reported while compiling.
fn device_error(error: GpuError) -> CompileError {
    CompileError::new(CompileErrorKind::Device, error.message)
}

/// The error of a routine compiled here with the `trace_stores` setting on: WGSL has no output
/// but buffers, so no store can be logged as it runs.
fn not_traced(routine: &Routine) -> CompileError {
    rcannl_backends::trace::unsupported("gpu", routine, "WGSL has no way to print as a kernel runs")
}

impl Backend for Gpu {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn target(&self) -> Option<String> {
        Some(self.device.describe())
    }

    fn compile_traced(
        &self,
        routine: &Routine,
        _sink: rcannl_backends::trace::Sink,
    ) -> Result<Box<dyn Executable>, CompileError> {
        Err(not_traced(routine))
    }

    fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError> {
        // Refused, not run untraced nor moved to the host: the setting asks for what this
        // backend cannot do.
        if rcannl_backends::trace::requested()? {
            return Err(not_traced(routine));
        }
        let features = self.device.features;
        let kept_held = routine
            .nodes
            .values()
            .filter(|n| n.memory_mode == Some(MemoryMode::Materialized))
            .try_for_each(|n| {
                if holds(n.precision, features) {
                    Ok(())
                } else {
                    Err(crate::wgsl::lacks(n.id, &n.label, n.precision))
                }
            });
        kept_held?;
        if check_precisions(routine, features).is_err() {
            let host = default_backend().compile(routine)?;
            return Ok(Box::new(GpuRoutine {
                routine: routine.clone(),
                work: Work::Host(host),
            }));
        }
        self.check_sizes(routine)?;
        let name = cache::name(routine, features);
        let program = match cache::read(&self.cache_dir, &name) {
            Some(program) => program,
            None => {
                let program = generate(routine, features, &Placement::new())?;
                cache::write(&self.cache_dir, &name, &program);
                program
            }
        };
        self.check_limits(routine, &program)?;
        let source = program.source();
        if let Some(folder) = settings::get_or_warn(&settings::WGSL_DIR).map(|s| s.value) {
            write_source(Path::new(&folder), routine, &name, &source)?;
        }
        let pipelines = self
            .device
            .pipelines(&program)
            .map_err(|e| device_error(e).context(format_args!("routine {}", routine.name)))?;
        let used: BTreeSet<NodeId> = program
            .kernels
            .iter()
            .flat_map(|k| k.nodes.iter().copied())
            .collect();
        let mut written = written_nodes(routine);
        written.retain(|n| used.contains(n));
        let buffer = |label: &str, size: u64, usage: wgpu::BufferUsages| {
            self.device.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let parameters = buffer(
            "rcannl parameters",
            4 * (program.statics.len() + program.placed.len()).max(1) as u64,
            wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        );
        let (int64, float64) = (computes_int64(routine), computes_f64(routine));
        let spills = [Kind::Float, Kind::Int, Kind::Word]
            .into_iter()
            .filter_map(|kind| {
                let cells = program.spill_cells(kind);
                let cell_bytes = spill_precision(kind, int64, float64).size_in_bytes() as u64;
                (cells > 0).then(|| {
                    let label = format!("rcannl spilled {kind:?} locals");
                    let spill = buffer(&label, cells * cell_bytes, wgpu::BufferUsages::STORAGE);
                    (kind, spill)
                })
            })
            .collect();
        let partials = (program.partial_cells() > 0).then(|| {
            buffer(
                "rcannl partial sums",
                4 * program.partial_cells(),
                wgpu::BufferUsages::STORAGE,
            )
        });
        let most_dispatches = program.kernels.iter().map(|k| k.dispatches).max();
        let chunks = most_dispatches.filter(|&d| d > 1).map(|d| {
            let numbers = buffer(
                "rcannl chunk numbers",
                4 * d,
                wgpu::BufferUsages::COPY_SRC | wgpu::BufferUsages::COPY_DST,
            );
            let counting: Vec<u8> = (0..d as i32).flat_map(i32::to_ne_bytes).collect();
            self.device.queue.write_buffer(&numbers, 0, &counting);
            let current = buffer(
                "rcannl chunk",
                4,
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            );
            (numbers, current)
        });
        Ok(Box::new(GpuRoutine {
            routine: routine.clone(),
            work: Work::Device(Box::new(Kernels {
                device: Arc::clone(&self.device),
                written,
                used,
                program: Arc::new(program),
                pipelines,
                source,
                parameters,
                spills,
                partials,
                chunks,
                bound: Mutex::default(),
            })),
        }))
    }
}

/// The environment variable naming a folder to write every routine's WGSL into.
pub const SOURCE_FOLDER: &str = "RCANNL_WGSL_DIR";

/// Writes `source`, the kernels of `routine` kept as `name`, into `folder` as
/// `<routine>-<name>`.
fn write_source(
    folder: &Path,
    routine: &Routine,
    name: &str,
    source: &str,
) -> Result<(), CompileError> {
    let path = folder.join(format!("{}-{name}", routine.name));
    std::fs::create_dir_all(folder)
        .and_then(|()| std::fs::write(&path, source))
        .map_err(|e| {
            CompileError::new(
                CompileErrorKind::Unavailable,
                format!(
                    "writing the kernels to {} (${SOURCE_FOLDER}): {e}",
                    path.display()
                ),
            )
        })
}

impl Gpu {
    /// Checks that every tensor of `routine` fits in one arena.
    fn check_sizes(&self, routine: &Routine) -> Result<(), CompileError> {
        let most = self.device.arena_bytes();
        for node in routine.nodes.values() {
            if node.memory_mode == Some(MemoryMode::Virtual) {
                continue;
            }
            let bytes = node
                .buffer_dims_checked()
                .and_then(|d| d.iter().try_fold(1u64, |n, &x| n.checked_mul(x as u64)))
                .and_then(|cells| cells.checked_mul(Class::of(node.precision).cell_bytes()));
            if bytes.is_none_or(|b| b > most) {
                return Err(CodegenError::new(
                    CodegenErrorKind::TooLarge,
                    format!(
                        "tensor '{}' of dims {:?} needs {} bytes on the GPU; this GPU binds at \
                         most {most} bytes in one storage buffer",
                        node.label,
                        node.dims,
                        bytes.map_or("more than 2^64".to_owned(), |b| b.to_string())
                    ),
                )
                .into());
            }
        }
        Ok(())
    }

    /// Checks every kernel of `program` against the adapter's limits on bindings and
    /// workgroups.
    fn check_limits(&self, routine: &Routine, program: &Program) -> Result<(), CompileError> {
        let limits = &self.device.limits;
        for (i, kernel) in program.kernels.iter().enumerate() {
            let bound = kernel.arenas.len()
                + usize::from(kernel.parameters)
                + kernel.spills.len()
                + usize::from(kernel.partials > 0)
                + usize::from(kernel.dispatches > 1);
            let workgroup = kernel.workgroup;
            let problem = if bound > limits.max_storage_buffers_per_shader_stage as usize {
                format!(
                    "binds {bound} storage buffers; this GPU binds at most {}",
                    limits.max_storage_buffers_per_shader_stage
                )
            } else if workgroup > limits.max_compute_invocations_per_workgroup
                || workgroup > limits.max_compute_workgroup_size_x
            {
                format!(
                    "runs workgroups of {workgroup} invocations; this GPU runs at most {}",
                    limits
                        .max_compute_invocations_per_workgroup
                        .min(limits.max_compute_workgroup_size_x)
                )
            } else {
                continue;
            };
            return Err(CompileError::new(
                CompileErrorKind::Device,
                format!("routine {}: kernel {i} {problem}", routine.name),
            ));
        }
        Ok(())
    }
}

/// Every node a routine writes (which the device then holds newer than the host).
fn written_nodes(routine: &Routine) -> BTreeSet<NodeId> {
    let mut written = BTreeSet::new();
    for stmt in &routine.body {
        stmt.walk(&mut |s| {
            if let Some(node) = s.written_node() {
                written.insert(node);
            }
            if let Stmt::Gemm { plan, .. } = s {
                written.insert(plan.c);
            }
        });
    }
    written.retain(|n| routine.nodes[n].memory_mode != Some(MemoryMode::Virtual));
    written
}

#[derive(Debug)]
struct GpuRoutine {
    routine: Routine,
    work: Work,
}

#[derive(Debug)]
enum Work {
    Device(Box<Kernels>),
    /// Runs on the host backend (see the module's documentation).
    Host(Box<dyn Executable>),
}

#[derive(Debug)]
struct Kernels {
    device: Arc<Device>,
    /// The kernels as compiled, every tensor in arena 0 of its class.
    program: Arc<Program>,
    pipelines: Vec<Arc<Pipeline>>,
    source: String,
    written: BTreeSet<NodeId>,
    used: BTreeSet<NodeId>,
    /// The kernels' parameters: the static indices of a run, then the tensors' offsets in their
    /// arenas.
    parameters: wgpu::Buffer,
    /// The spilled locals of each compute kind: a cell per slot and invocation.
    spills: Vec<(Kind, wgpu::Buffer)>,
    /// The partial sums of matrix products whose reductions are split.
    partials: Option<wgpu::Buffer>,
    /// For kernels dispatched in chunks: the numbers 0, 1, … and the cell each dispatch reads
    /// its own from (copied in before it).
    chunks: Option<(wgpu::Buffer, wgpu::Buffer)>,
    /// What the last run bound.
    bound: Mutex<Option<Bound>>,
}

/// The kernels bound over one set of device copies, as last run: made again when the copies,
/// their arenas or the tensors' arenas change.
#[derive(Debug)]
struct Bound {
    memory: u64,
    generation: u64,
    placement: Placement,
    /// The program for that placement (the compiled one where every tensor lies in arena 0).
    program: Arc<Program>,
    pipelines: Vec<Arc<Pipeline>>,
    groups: Vec<Option<wgpu::BindGroup>>,
    /// The parameters last written to the device.
    parameters: Vec<i32>,
}

impl Executable for GpuRoutine {
    fn run(&self, buffers: &mut Buffers, statics: &HashMap<Symbol, i64>) -> Result<(), RunError> {
        match &self.work {
            Work::Host(host) => host.run(buffers, statics),
            Work::Device(kernels) => kernels.run(&self.routine, buffers, statics),
        }
    }

    fn routine(&self) -> &Routine {
        &self.routine
    }

    fn source(&self) -> Option<&str> {
        match &self.work {
            Work::Device(kernels) => Some(&kernels.source),
            Work::Host(host) => host.source(),
        }
    }
}

impl Kernels {
    fn run(
        &self,
        routine: &Routine,
        buffers: &mut Buffers,
        statics: &HashMap<Symbol, i64>,
    ) -> Result<(), RunError> {
        let values = static_values(routine, statics)?;
        for id in &self.used {
            let given = buffers.nodes().get(id).ok_or_else(|| {
                RunError::new(RunErrorKind::Buffers, format!("no buffer for {id}"))
            })?;
            check_buffer(routine, *id, given)?;
        }
        if buffers.device_copies().is_none() {
            buffers.attach_device(Box::new(DeviceMemory::new(Arc::clone(&self.device))))?;
        }
        for id in &self.used {
            buffers.to_device(*id)?;
        }
        let memory = buffers
            .device_copies()
            .and_then(|d| d.as_any_mut().downcast_mut::<DeviceMemory>())
            .filter(|m| m.is_on(&self.device))
            .ok_or_else(|| {
                RunError::new(
                    RunErrorKind::Buffers,
                    format!(
                        "routine {}: these buffers have copies on another device",
                        routine.name
                    ),
                )
            })?;
        let device = &self.device;
        let mut bound = self.bound.lock().unwrap_or_else(|p| p.into_inner());
        let placement = memory.placement(self.used.iter().copied());
        if bound.as_ref().is_none_or(|b| {
            b.memory != memory.id || b.generation != memory.generation || b.placement != placement
        }) {
            *bound = Some(self.bind(routine, memory, placement)?);
        }
        let bound = bound.as_mut().expect("bound above");
        let mut parameters: Vec<i32> = values.into_iter().map(|v| v as i32).collect();
        for node in &bound.program.placed {
            let offset = match memory.place(*node) {
                Ok(place) => place.offset / place.arena.class.cell_bytes(),
                Err(_) => 0,
            };
            parameters.push(offset as i32);
        }
        if parameters != bound.parameters {
            let bytes: Vec<u8> = parameters.iter().flat_map(|v| v.to_ne_bytes()).collect();
            device.queue.write_buffer(&self.parameters, 0, &bytes);
            traffic::count_to_device(bytes.len() as u64);
            bound.parameters = parameters;
        }
        let mut encoder = device
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        let max_groups = device.limits.max_compute_workgroups_per_dimension.max(1) as u64;
        let mut dispatched = 0;
        for ((kernel, pipeline), group) in bound
            .program
            .kernels
            .iter()
            .zip(&bound.pipelines)
            .zip(&bound.groups)
        {
            let Some(group) = group else { continue };
            let workgroups = kernel.invocations.div_ceil(u64::from(kernel.workgroup));
            let x = workgroups.min(max_groups);
            let y = workgroups.div_ceil(x);
            for chunk in 0..kernel.dispatches {
                if let Some((numbers, current)) = &self.chunks
                    && kernel.dispatches > 1
                {
                    encoder.copy_buffer_to_buffer(numbers, 4 * chunk, current, 0, 4);
                }
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor::default());
                pass.set_pipeline(&pipeline.pipeline);
                pass.set_bind_group(0, group, &[]);
                pass.dispatch_workgroups(x as u32, y as u32, 1);
                dispatched += 1;
            }
        }
        device.queue.submit([encoder.finish()]);
        traffic::count_kernels(dispatched);
        for id in &self.written {
            buffers.mark_written_on_device(*id);
        }
        device
            .take_errors(&format!("running routine {}", routine.name))
            .map_err(|e| RunError::new(RunErrorKind::Device, e.message))
    }

    /// The kernels for the tensors' places in `memory` (generated again where a tensor lies
    /// beyond arena 0 of its class) and their bind groups.
    fn bind(
        &self,
        routine: &Routine,
        memory: &DeviceMemory,
        placement: Placement,
    ) -> Result<Bound, RunError> {
        let device_failure = |message: String| {
            RunError::new(
                RunErrorKind::Device,
                format!("routine {}: {message}", routine.name),
            )
        };
        let (program, pipelines) = if placement.is_empty() {
            (Arc::clone(&self.program), self.pipelines.clone())
        } else {
            let program = generate(routine, self.device.features, &placement)
                .map_err(|e| device_failure(e.to_string()))?;
            let pipelines = self
                .device
                .pipelines(&program)
                .map_err(|e| device_failure(e.message))?;
            (Arc::new(program), pipelines)
        };
        let mut groups = Vec::with_capacity(program.kernels.len());
        for (kernel, pipeline) in program.kernels.iter().zip(&pipelines) {
            if kernel.invocations == 0 {
                groups.push(None);
                continue;
            }
            let mut resources = Vec::with_capacity(kernel.arenas.len() + 4);
            for arena in &kernel.arenas {
                resources.push(memory.arena(*arena)?.as_entire_binding());
            }
            if kernel.parameters {
                resources.push(self.parameters.as_entire_binding());
            }
            for (kind, _) in &kernel.spills {
                let (_, spill) = self
                    .spills
                    .iter()
                    .find(|(k, _)| k == kind)
                    .expect("made with the kernels");
                resources.push(spill.as_entire_binding());
            }
            if kernel.partials > 0 {
                let partials = self.partials.as_ref().expect("made with the kernels");
                resources.push(partials.as_entire_binding());
            }
            if kernel.dispatches > 1 {
                let (_, current) = self.chunks.as_ref().expect("made with the kernels");
                resources.push(current.as_entire_binding());
            }
            let entries: Vec<wgpu::BindGroupEntry> = resources
                .into_iter()
                .enumerate()
                .map(|(i, resource)| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource,
                })
                .collect();
            groups.push(Some(self.device.device.create_bind_group(
                &wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &pipeline.layout,
                    entries: &entries,
                },
            )));
        }
        Ok(Bound {
            memory: memory.id,
            generation: memory.generation,
            placement,
            program,
            pipelines,
            groups,
            parameters: Vec::new(),
        })
    }
}
