//! Prints a shrunk workload as a ready-to-paste Rust test against the public API: a function
//! taking the [`ServerOptions`] that runs the program and asserts what the reference model
//! expects, and a `#[test]` that calls it with the default options.
//!
//! **Invariant:** the printed program makes the client calls the driver makes for that
//! workload, on the same streams and in the same order — the world's setup, every operation, the
//! end of a capture still open, the final drain of every stream, the read-back of everything
//! live (pending lazy reads included), the releases, the memory baseline, then the simulator's
//! watchdog and sanitizer — so the simulated device executes the same operations as the
//! explorer's run and the program fails at the check the explorer's run failed (a read the
//! driver judged only at the end fails at the read). Host threads become named clients on the
//! driver's streams: thread `t`'s own stream is `StreamId(FIRST_OWN_STREAM + t)` and the
//! driver's own calls go to `StreamId(HOST_STREAM)`. The expectations are exact only where no fault is injected and every allocation
//! succeeds; [`print()`] refuses other runs.

mod capture_code;
mod edge_code;
mod kernel_code;
mod read_code;
mod recorded_code;
mod step_code;

pub use recorded_code::print as print_recording;

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use lockstep::{CaptureError, MemoryPoolsConfig, ServerError, ServerOptions, StreamId};
use lockstep_sim::SimConfig;

use super::coverage::Method;
use super::failure::{Check, Violation};
use super::model::Model;
use super::shrink::Shrunk;
use super::workload::{On, SLOTS, TENSOR_SLOTS, Workload};
use super::world::World;

use super::driver::{Captures, FIRST_OWN_STREAM, HOST_STREAM};

/// Why a shrunk run has no printed form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unprintable {
    /// The world injects faults at random.
    #[error(
        "the world injects faults at random: which ones fire, and so what each call returns, is no fixed expectation"
    )]
    Faults,
    /// A pool's cap refused this many allocations in the shrunk run.
    #[error(
        "a pool's cap refused {0} allocation(s) in the shrunk run, and a printed program expects every allocation to succeed"
    )]
    CappedRefusals(u64),
    /// The run uses something the printer cannot write as a test, named.
    #[error("{0}")]
    Unsupported(String),
}

/// Rust statements under construction, and the names they import.
#[derive(Default)]
pub struct Code {
    lines: Vec<String>,
    uses: BTreeSet<(&'static str, &'static str)>,
}

impl Code {
    fn line(&mut self, line: impl Into<String>) {
        self.lines.push(line.into());
    }

    fn uses(&mut self, module: &'static str, names: &[&'static str]) {
        self.uses.extend(names.iter().map(|&n| (module, n)));
    }
}

/// Prints `shrunk`, a shrunk workload of `world` (drawn with `--faults` when `faults`), which
/// failed when run with `options`.
pub fn print(
    world: &World,
    faults: bool,
    shrunk: &Shrunk,
    options: &ServerOptions,
) -> Result<String, Unprintable> {
    if world.injects_faults() {
        return Err(Unprintable::Faults);
    }
    if shrunk.capped_refusals > 0 {
        return Err(Unprintable::CappedRefusals(shrunk.capped_refusals));
    }
    let mut printer = Printer::new(world, &shrunk.workload);
    printer.setup();
    // Building a kernel touches no device: the refused size is printed only where it failed.
    if shrunk.failure.class.check == Check::WorkgroupSizeAccepted {
        printer.refused_workgroup();
    }
    for (thread, step) in shrunk.workload.in_order() {
        printer.step(thread, step)?;
    }
    printer.teardown()?;
    let name = format!("seed_{}{}", world.seed, if faults { "_faults" } else { "" });
    Ok(render(&name, world, faults, shrunk, options, printer.code))
}

fn render(
    name: &str,
    world: &World,
    faults: bool,
    shrunk: &Shrunk,
    options: &ServerOptions,
    code: Code,
) -> String {
    let flag = if faults { " --faults" } else { "" };
    let mut out = format!(
        "/// `lockstep replay --seed {seed}{flag} --shrink`: {from} operations shrunk to {to} in {runs} runs.\n\
         /// Explored with `{options:?}`,\n\
         /// it failed {class}\n\
         pub fn {name}(options: lockstep::ServerOptions) {{\n",
        seed = world.seed,
        from = shrunk.original_len,
        to = shrunk.workload.len(),
        runs = shrunk.runs,
        class = shrunk.failure.class,
    );
    out += &body(code);
    out += &test_calling(name);
    out
}

/// `code`'s `use` lines, a blank line, then its statements, each indented into a function.
fn body(code: Code) -> String {
    let mut out = String::new();
    let mut modules: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (module, name) in &code.uses {
        modules.entry(module).or_default().push(name);
    }
    for (module, names) in modules {
        out += &match &names[..] {
            [name] => format!("    use {module}::{name};\n"),
            names => format!("    use {module}::{{{}}};\n", names.join(", ")),
        };
    }
    out += "\n";
    for line in code.lines {
        out += &if line.is_empty() {
            "\n".to_owned()
        } else {
            format!("    {line}\n")
        };
    }
    out
}

/// The end of printed function `name`, and the `#[test]` that calls it with the default
/// options.
fn test_calling(name: &str) -> String {
    format!(
        "}}\n\n#[test]\nfn {name}_shrunk() {{\n    {name}(lockstep::ServerOptions::default());\n}}\n"
    )
}

/// A live buffer slot: its handle's variable and its model buffer.
struct Slot {
    var: String,
    buf: u64,
}

/// A live tensor group: its layouts' variable, the shapes and the model buffers.
struct Group {
    var: String,
    shapes: Vec<Vec<usize>>,
    bufs: Vec<u64>,
}

/// A lazy read not accessed yet.
struct Lazy {
    var: String,
    buf: u64,
    stream: StreamId,
}

/// The captured graph: its variable, stream and launches (kernel, dst, src, k) on model buffers.
struct Captured {
    var: String,
    stream: StreamId,
    launches: Vec<(usize, u64, u64, u32)>,
}

/// Walks a workload as the driver does, against the model, writing the calls it makes.
struct Printer<'w> {
    world: &'w World,
    code: Code,
    model: Model,
    slots: Vec<Option<Slot>>,
    tensors: Vec<Option<Group>>,
    lazies: VecDeque<Lazy>,
    /// Live graphs, oldest first (as the driver's).
    graphs: Vec<Captured>,
    captures: Captures,
    /// The client variable of each stream used so far.
    clients: BTreeMap<StreamId, String>,
    /// The stream of each thread that acts on its own stream.
    thread_streams: BTreeMap<usize, StreamId>,
    /// Kernel variables defined so far: the world's by index, and the overrun kernel.
    kernels: BTreeSet<usize>,
    overrun: bool,
    vars: usize,
}

impl<'w> Printer<'w> {
    fn new(world: &'w World, workload: &Workload) -> Self {
        let thread_streams = workload
            .in_order()
            .filter(|(_, step)| step.on == On::Thread)
            .map(|(thread, _)| (thread, StreamId(FIRST_OWN_STREAM + thread as u64)))
            .collect();
        Printer {
            world,
            code: Code::default(),
            model: Model::new(false),
            slots: (0..SLOTS).map(|_| None).collect(),
            tensors: (0..TENSOR_SLOTS).map(|_| None).collect(),
            lazies: VecDeque::new(),
            graphs: Vec::new(),
            captures: Captures::default(),
            clients: BTreeMap::new(),
            thread_streams,
            kernels: BTreeSet::new(),
            overrun: false,
            vars: 0,
        }
    }

    /// The handle variable in `slot` (a clone, so the printer stays free to change) and its
    /// model buffer.
    fn in_slot(&self, slot: usize) -> Option<(String, u64)> {
        self.slots[slot].as_ref().map(|s| (s.var.clone(), s.buf))
    }

    /// A fresh variable name.
    fn var(&mut self, prefix: &str) -> String {
        self.vars += 1;
        format!("{prefix}{}", self.vars)
    }

    /// The devices, clients, pools and memory baselines, as the driver prepares them.
    fn setup(&mut self) {
        self.code.uses("lockstep", &["ComputeClient", "StreamId"]);
        self.code
            .uses("lockstep_sim", &["SimConfig", "SimDevice", "SimProbe"]);
        let configs = self.world.sim_configs();
        if configs.len() == 1 {
            self.code
                .line("let devices = vec![SimDevice::new(SimConfig {");
            config_fields(&mut self.code, "    ", &configs[0]);
            self.code.line("})];");
        } else {
            self.code.uses("lockstep_sim", &["SimCluster"]);
            self.code
                .line("let devices = SimCluster::from_configs(vec![");
            for config in &configs {
                self.code.line("    SimConfig {");
                config_fields(&mut self.code, "        ", config);
                self.code.line("    },");
            }
            self.code.line("])");
            self.code.line(".into_devices();");
        }
        self.code
            .line("let probes: Vec<SimProbe> = devices.iter().map(SimDevice::probe).collect();");
        self.code.line("let mut clients = devices");
        self.code.line("    .into_iter()");
        // As the explorer made them: served inline, or (`World::actor`) by actor threads.
        let make = if self.world.actor {
            "with_options"
        } else {
            "inline"
        };
        self.code.line(format!(
            "    .map(|device| ComputeClient::{make}(device, options));"
        ));
        self.code
            .line("// The explorer's own thread: setup, cleanup, memory baseline.");
        self.code.line("let mut client = clients.next().unwrap();");
        self.code
            .line(format!("client.set_stream(StreamId({HOST_STREAM}));"));
        self.clients
            .insert(StreamId(HOST_STREAM), "client".to_owned());
        for peer in 0..self.world.peers {
            self.code
                .line(format!("let mut peer{peer} = clients.next().unwrap();"));
            self.code
                .line(format!("peer{peer}.set_stream(StreamId(0));"));
        }
        if let Some(pools) = &self.world.pools {
            let pools = pools_code(&mut self.code, pools);
            let install = format!("client.install_memory_pools(&{pools})");
            match self.world.pools_refusal() {
                None => self.code.line(format!("{install}.unwrap();")),
                Some(refusal) => {
                    self.code
                        .uses("lockstep", &["InstallMemoryPoolsError", "LayoutError"]);
                    self.code.line(format!(
                        "assert_eq!({install}, Err(InstallMemoryPoolsError::InvalidLayout(LayoutError::{refusal:?})));"
                    ));
                }
            }
        }
        if let Some(bytes) = self.world.budget_bytes {
            self.code
                .line(format!("client.set_memory_budget(Some({bytes})).unwrap();"));
        }
        self.code
            .line("let baseline = client.memory_usage().unwrap();");
        for peer in 0..self.world.peers {
            self.code.line(format!(
                "let peer{peer}_baseline = peer{peer}.memory_usage().unwrap();"
            ));
        }
    }

    /// The world's refused workgroup size, which building its first kernel with must be
    /// refused (printed after the setup, as the driver judges it).
    fn refused_workgroup(&mut self) {
        if let Some(size) = self.world.refused_workgroup {
            let kernel = self.kernel(0);
            self.code.uses("lockstep", &["Kernel"]);
            self.code.uses("lockstep::kernel", &["KernelError"]);
            self.code.line(format!(
                "let sized = lockstep::kernel::KernelDef {{ workgroup_size: {size:?}, ..{kernel}.def().clone() }};"
            ));
            self.code.line(
                "assert!(matches!(Kernel::new(sized), Err(KernelError::InvalidWorkgroupSize { .. })));",
            );
        }
    }

    /// The driver's end of a run: the open capture ended, every stream drained, everything released, memory back to
    /// its baseline, the peers clean, then the simulator's own checks.
    fn teardown(&mut self) -> Result<(), Unprintable> {
        if self.captures.open.is_some() {
            self.code.line("");
            self.code.line("// No capture outlives the workload.");
            self.end_capture();
        }
        self.code.line("");
        self.code
            .line("// Every stream drains; everything live reads back as the model holds it;");
        self.code.line("// everything is released.");
        self.drain()?;
        self.read_back_everything()?;
        while !self.lazies.is_empty() {
            self.materialize()?;
        }
        for graph in std::mem::take(&mut self.graphs) {
            self.code.line(format!("drop({});", graph.var));
        }
        let slots = std::mem::take(&mut self.slots).into_iter().flatten();
        for var in slots.map(|s| s.var) {
            self.code.line(format!("drop({var});"));
        }
        let tensors = std::mem::take(&mut self.tensors).into_iter().flatten();
        for var in tensors.map(|g| g.var) {
            self.code.line(format!("drop({var});"));
        }
        self.code.line("client.memory_cleanup();");
        self.drain()?;
        self.code
            .line("assert_eq!(client.memory_usage().unwrap(), baseline);");
        for peer in 0..self.world.peers {
            self.code
                .line(format!("assert_eq!(peer{peer}.sync(), Ok(()));"));
            self.code.line(format!("peer{peer}.memory_cleanup();"));
            self.code
                .line(format!("assert_eq!(peer{peer}.sync(), Ok(()));"));
            self.code.line(format!(
                "assert_eq!(peer{peer}.memory_usage().unwrap(), peer{peer}_baseline);"
            ));
        }
        let clients: Vec<String> = self
            .clients
            .values()
            .cloned()
            .chain((0..self.world.peers).map(|p| format!("peer{p}")))
            .collect();
        self.code.line("");
        self.code
            .line("// With every client gone, the simulator's verdicts: peers first.");
        self.code.line(match &clients[..] {
            [one] => format!("drop({one});"),
            all => format!("drop(({}));", all.join(", ")),
        });
        self.code
            .line("for probe in probes.iter().skip(1).chain(probes.first()) {");
        self.code.line("    let observed = probe.observations();");
        self.code.line(
            "    assert!(!observed.watchdog_fired, \"hang: virtual time passed the watchdog\");",
        );
        self.code.line(
            "    assert!(observed.reports.is_empty(), \"sanitizer: {:?}\", observed.reports);",
        );
        self.code.line("}");
        Ok(())
    }

    /// Syncs every stream the workload used, in stream order, until it succeeds: first the
    /// kernel fault it still owes, if any.
    fn drain(&mut self) -> Result<(), Unprintable> {
        for s in self.model.streams() {
            let c = self.clients[&s].clone();
            if let Some(fault) = self.model.expected_fault(s).cloned() {
                let expected = error_code(&mut self.code, &fault)?;
                self.code
                    .line(format!("assert_eq!({c}.sync(), Err({expected}));"));
                self.model
                    .blocking(s, Method::Sync, Err(&fault), true)
                    .map_err(model_refuses)?;
            }
            self.code.line(format!("assert_eq!({c}.sync(), Ok(()));"));
            self.model
                .blocking(s, Method::Sync, Ok(()), true)
                .map_err(model_refuses)?;
        }
        Ok(())
    }
}

/// The fields of `config` that a world sets, the rest from `SimConfig::new(seed)`, each line
/// indented by `indent`.
fn config_fields(code: &mut Code, indent: &str, config: &SimConfig) {
    let fields = [
        format!("memory_bytes: {},", config.memory_bytes),
        format!("max_allocation_bytes: {},", config.max_allocation_bytes),
        format!("max_background_steps: {},", config.max_background_steps),
        format!("watchdog_ns: {},", config.watchdog_ns),
        format!("..SimConfig::new({})", config.seed),
    ];
    for field in fields {
        code.line(format!("{indent}{field}"));
    }
}

fn pools_code(code: &mut Code, pools: &MemoryPoolsConfig) -> String {
    code.uses("lockstep", &["MemoryPoolsConfig"]);
    match pools {
        MemoryPoolsConfig::Preset(preset) => {
            code.uses("lockstep", &["PoolPreset"]);
            format!("MemoryPoolsConfig::Preset(PoolPreset::{preset:?})")
        }
        MemoryPoolsConfig::Pools(layouts) => {
            code.uses("lockstep", &["PoolLayout"]);
            let layouts: Vec<String> = layouts
                .iter()
                .map(|p| {
                    format!(
                        "PoolLayout {{ page_bytes: {}, max_slice_bytes: {}, cap_bytes: {} }}",
                        p.page_bytes, p.max_slice_bytes, p.cap_bytes
                    )
                })
                .collect();
            format!("MemoryPoolsConfig::Pools(vec![{}])", layouts.join(", "))
        }
    }
}

/// The model judged the printed program's own expectations wrong: the printer and the driver
/// disagree.
fn model_refuses(why: Violation) -> Unprintable {
    Unprintable::Unsupported(format!("the model refuses the printed expectations: {why}"))
}

/// An expected error as an expression. Fault-free worlds expect only checked-kernel faults.
fn error_code(code: &mut Code, err: &ServerError) -> Result<String, Unprintable> {
    match err {
        ServerError::KernelFault {
            kernel,
            binding,
            index,
            stream,
        } => {
            code.uses("lockstep", &["ServerError", "StreamId"]);
            Ok(format!(
                "ServerError::KernelFault {{ kernel: {kernel:?}.to_owned(), binding: {binding}, index: {index}, stream: StreamId({}) }}",
                stream.0
            ))
        }
        other => Err(Unprintable::Unsupported(format!(
            "no printed form for the expected error {other}"
        ))),
    }
}

/// `Some(err)` of a refused capture call, as an expression.
fn refusal_code(code: &mut Code, err: &CaptureError) -> String {
    code.uses("lockstep", &["CaptureError", "ServerError"]);
    format!("Some(ServerError::Capture(CaptureError::{err:?}))")
}

/// `[a, b, ..]`, eight to a line after the first when long.
fn list(values: &[u32]) -> String {
    let items: Vec<String> = values.iter().map(u32::to_string).collect();
    if items.len() <= 8 {
        return items.join(", ");
    }
    let lines: Vec<String> = items.chunks(8).map(|c| c.join(", ")).collect();
    format!("\n        {},\n    ", lines.join(",\n        "))
}

/// `Bytes` holding `values`.
fn bytes(code: &mut Code, values: &[u32]) -> String {
    code.uses("lockstep", &["Bytes"]);
    format!("Bytes::from_elems::<u32>(&[{}])", list(values))
}

/// `vec![..]` of `values`.
fn vec_of(values: &[u32]) -> String {
    format!("vec![{}]", list(values))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::failure::{Check, Difference, Side, Stage};
    use crate::shrink::workload_of;
    use crate::workload::{Action, Step};

    #[test]
    fn a_lazy_read_still_pending_is_materialised_after_the_read_back() {
        let on = On::Pinned(0);
        let steps = [
            Action::Create {
                slot: 0,
                len: 2,
                fill: 7,
            },
            Action::ReadLazy { slot: 0 },
        ]
        .map(|action| (0, Step { on, action }));
        let shrunk = Shrunk {
            workload: workload_of(&steps),
            original_len: 2,
            runs: 1,
            failure: Violation::new(
                Check::WrongRead {
                    on: Side::Explored,
                    differs: Difference::Values,
                },
                "read on stream-100",
            )
            .context("the final read of everything live")
            .in_stage(Stage::FinalRead),
            capped_refusals: 0,
        };
        let world = World::draw(0, false);
        let text = print(&world, false, &shrunk, &ServerOptions::default()).unwrap();
        // The driver's order after its drain: the read-back, the pending lazy read judged on
        // its own stream, then the releases.
        let tail = &text[text.find("// Every stream drains").unwrap()..];
        let at = |code: &str| {
            tail.find(code)
                .unwrap_or_else(|| panic!("no {code}:\n{tail}"))
        };
        let read_back = at("block_on(client.read_async(vec![h1.clone()])).unwrap();");
        let lazy = at("assert_eq!(lazy2.materialize().map(|b| Bytes::from(b.to_vec())).unwrap()");
        let release = at("drop(h1);");
        assert!(read_back < lazy && lazy < release, "{tail}");
    }

    #[test]
    fn the_printed_config_fields_are_all_a_world_sets() {
        for seed in 0..32 {
            for config in World::draw(seed, false).sim_configs() {
                let printed = SimConfig {
                    memory_bytes: config.memory_bytes,
                    max_allocation_bytes: config.max_allocation_bytes,
                    max_background_steps: config.max_background_steps,
                    watchdog_ns: config.watchdog_ns,
                    ..SimConfig::new(config.seed)
                };
                assert_eq!(printed, config, "seed {seed}");
            }
        }
    }
}
