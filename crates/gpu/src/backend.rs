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

use rcannl_backends::error::{check_buffer, static_values};
use rcannl_backends::{
    Backend, Buffers, CompileError, CompileErrorKind, Executable, RunError, RunErrorKind,
    default_backend,
};
use rcannl_ir::{LocalId, MemoryMode, NodeId, Routine, Stmt, Symbol};

use crate::cache;
use crate::device::{Device, GpuError, Pipeline};
use crate::memory::DeviceMemory;
use crate::wgsl::{Program, check_precisions, generate, holds};

/// The GPU backend.
#[derive(Debug, Clone)]
pub struct Gpu {
    device: Arc<Device>,
    cache_dir: PathBuf,
}

impl Gpu {
    /// The backend on the process's device, keeping generated programs in the C backend's cache
    /// folder (`$RCANNL_CACHE_DIR`, …); an error says what was looked for when there is no
    /// device.
    pub fn new() -> Result<Gpu, GpuError> {
        Ok(Gpu {
            device: Device::shared()?,
            cache_dir: rcannl_backends::cache::default_folder(),
        })
    }

    /// The backend keeping generated programs in `dir` instead.
    pub fn with_cache_dir(mut self, dir: &Path) -> Gpu {
        self.cache_dir = dir.to_owned();
        self
    }

    /// The device the backend runs on: the process's one device, shared by every GPU backend.
    pub fn device(&self) -> &Arc<Device> {
        &self.device
    }
}

/// An error the device reported while compiling.
fn device_error(error: GpuError) -> CompileError {
    CompileError::new(CompileErrorKind::Device, error.message)
}

impl Backend for Gpu {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn target(&self) -> Option<String> {
        Some(self.device.describe())
    }

    fn compile(&self, routine: &Routine) -> Result<Box<dyn Executable>, CompileError> {
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
        let name = cache::name(routine, features);
        let program = match cache::read(&self.cache_dir, &name) {
            Some(program) => program,
            None => {
                let program = generate(routine, features)?;
                cache::write(&self.cache_dir, &name, &program);
                program
            }
        };
        let pipelines = program
            .kernels
            .iter()
            .map(|k| self.device.pipeline(&k.source))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| device_error(e).context(format_args!("routine {}", routine.name)))?;
        self.device.keep_pipelines();
        let source = program.source();
        let used: BTreeSet<NodeId> = program
            .kernels
            .iter()
            .flat_map(|k| k.bindings.iter().copied())
            .collect();
        let mut written = written_nodes(routine);
        written.retain(|n| used.contains(n));
        let statics = self.device.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("rcannl statics"),
            size: 4 * program.statics.len().max(1) as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let buffer = |label: &str, size: u64, usage: wgpu::BufferUsages| {
            self.device.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        let spills = program
            .kernels
            .iter()
            .flat_map(|k| k.spills.iter().copied())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|id| (id, buffer("rcannl local", 16, wgpu::BufferUsages::STORAGE)))
            .collect();
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
                program,
                pipelines,
                source,
                statics,
                spills,
                chunks,
                bind_groups: Mutex::default(),
            })),
        }))
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
    program: Program,
    pipelines: Vec<Arc<Pipeline>>,
    source: String,
    written: BTreeSet<NodeId>,
    used: BTreeSet<NodeId>,
    /// The static indices of a run, as the kernels read them.
    statics: wgpu::Buffer,
    /// The one-cell buffers of the locals kernels keep in memory.
    spills: HashMap<LocalId, wgpu::Buffer>,
    /// For kernels dispatched in chunks: the numbers 0, 1, … and the cell each dispatch reads
    /// its own from (copied in before it).
    chunks: Option<(wgpu::Buffer, wgpu::Buffer)>,
    /// The bind groups of each kernel, made on the first run over a set of device copies (the
    /// copies of a node never move, so neither do the groups).
    bind_groups: Mutex<Option<(u64, Vec<Option<wgpu::BindGroup>>)>>,
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
        let values: Vec<i32> = static_values(routine, statics)?
            .into_iter()
            .map(|v| v as i32)
            .collect();
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
        if !values.is_empty() {
            let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_ne_bytes()).collect();
            device.queue.write_buffer(&self.statics, 0, &bytes);
        }
        let identity = memory.id;
        let mut groups = self.bind_groups.lock().unwrap_or_else(|p| p.into_inner());
        if groups.as_ref().is_none_or(|(owner, _)| *owner != identity) {
            let mut made = Vec::with_capacity(self.program.kernels.len());
            for (kernel, pipeline) in self.program.kernels.iter().zip(&self.pipelines) {
                if kernel.invocations == 0 {
                    made.push(None);
                    continue;
                }
                let mut entries = Vec::with_capacity(kernel.bindings.len() + 1);
                for (i, id) in kernel.bindings.iter().enumerate() {
                    entries.push(wgpu::BindGroupEntry {
                        binding: i as u32,
                        resource: memory.buffer(*id)?.as_entire_binding(),
                    });
                }
                if kernel.reads_statics {
                    entries.push(wgpu::BindGroupEntry {
                        binding: entries.len() as u32,
                        resource: self.statics.as_entire_binding(),
                    });
                }
                for id in &kernel.spills {
                    entries.push(wgpu::BindGroupEntry {
                        binding: entries.len() as u32,
                        resource: self.spills[id].as_entire_binding(),
                    });
                }
                if kernel.dispatches > 1 {
                    let (_, current) = self.chunks.as_ref().expect("made with the kernels");
                    entries.push(wgpu::BindGroupEntry {
                        binding: entries.len() as u32,
                        resource: current.as_entire_binding(),
                    });
                }
                made.push(Some(device.device.create_bind_group(
                    &wgpu::BindGroupDescriptor {
                        label: None,
                        layout: &pipeline.layout,
                        entries: &entries,
                    },
                )));
            }
            *groups = Some((identity, made));
        }
        let (_, made) = groups.as_ref().expect("made above");
        let mut encoder = device
            .device
            .create_command_encoder(&wgpu::CommandEncoderDescriptor::default());
        let max_groups = device.limits.max_compute_workgroups_per_dimension.max(1) as u64;
        for ((kernel, pipeline), group) in
            self.program.kernels.iter().zip(&self.pipelines).zip(made)
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
            }
        }
        device.queue.submit([encoder.finish()]);
        drop(groups);
        for id in &self.written {
            buffers.mark_written_on_device(*id);
        }
        device
            .take_errors(&format!("running routine {}", routine.name))
            .map_err(|e| RunError::new(RunErrorKind::Device, e.message))
    }
}
