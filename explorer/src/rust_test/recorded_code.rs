//! Prints a shrunk failing seed of a recording as a Rust test against the public API: the
//! recorded devices as simulators seeded as the seed seeded them, every kept call in the
//! failing order on a client of its recorded stream, each read asserted equal to its recorded
//! chunk hashes (`lockstep::record::chunk_hashes`), then every stream synced, every buffer
//! dropped and the simulator's watchdog and sanitizer asserted quiet. Its `#[test]` expects
//! the panic of the check that failed: it passes while the recorded program has the bug.
//!
//! **Invariant:** the printed program makes the device calls the replay makes for those calls
//! (`lockstep::replay::Replayer`), in the same order on the same streams, then the explorer's
//! drain, so the simulated devices execute what the explorer's run executed, and it fails at
//! the check that run failed. Kernels are printed as their IR in JSON (`serde_json`), the form
//! a recording's `KernelDef` deserializes from. What the replay would not run as recorded
//! (faults, data kept only as a hash, graphs, dry runs, calls recorded by name only) has no
//! printed form.

use std::collections::BTreeMap;

use lockstep::kernel::Scalar;
use lockstep::record::{Count, Data, Event, Op, Outcome, Range};

use super::{Code, Unprintable, body, list};
use crate::failure::Check;
use crate::recorded::RecordedCall;
use crate::recorded::shrink::ShrunkRecording;
use crate::world::WATCHDOG_NS;

/// Syncs per stream at the end, as the explorer's drain makes at most.
const DRAIN_SYNCS: usize = 4;

/// Prints `shrunk`, seed `seed` of the recording at `shown_path` (as the command named it).
///
/// # Errors
/// [`Unprintable`] for a run with an injected fault, or a call with no printed form.
pub fn print(shown_path: &str, seed: u64, shrunk: &ShrunkRecording) -> Result<String, Unprintable> {
    if shrunk.fault.is_some() {
        return Err(Unprintable::Faults);
    }
    let mut printer = Printer::default();
    printer.setup(seed, &shrunk.recording.declarations)?;
    for call in &shrunk.recording.calls {
        printer.call(call)?;
    }
    printer.teardown();
    let name = format!("recording_seed_{seed}");
    let expected = expected_panic(&shrunk.failure.class.check);
    let mut out = format!(
        "/// `lockstep explore --recording {shown_path} --seed {seed} --seeds 1 --shrink`: {from} calls shrunk\n\
         /// to {to} in {runs} runs; it failed {class}.\n\
         pub fn {name}(options: lockstep::ServerOptions) {{\n",
        from = shrunk.original_calls,
        to = shrunk.recording.calls.len(),
        runs = shrunk.runs,
        class = shrunk.failure.class,
    );
    out += &body(printer.code);
    out += &format!(
        "}}\n\n/// Passes while the program fails as the explorer found.\n#[test]\n#[should_panic{expected}]\nfn {name}_reproduced() {{\n    {name}(lockstep::ServerOptions::default());\n}}\n"
    );
    Ok(out)
}

/// The `should_panic` argument naming the message the printed program fails with, for the
/// checks it asserts with a message of its own.
fn expected_panic(check: &Check) -> &'static str {
    match check {
        Check::DiffersFromRecording => "(expected = \"differs from the recorded run\")",
        Check::Sanitizer(_) => "(expected = \"sanitizer\")",
        Check::Hang => "(expected = \"hang\")",
        _ => "",
    }
}

/// The calls printed so far, and the variables they defined.
#[derive(Default)]
struct Printer {
    code: Code,
    /// Each recorded device's client variable.
    devices: Vec<u32>,
    /// The client variable of each (device, stream) used so far.
    clients: BTreeMap<(u32, u64), String>,
    /// Each live recorded (device, buffer): its variable and size.
    buffers: BTreeMap<(u32, u64), (String, u64)>,
    /// Each kernel's variable, by content hash.
    kernels: BTreeMap<u64, String>,
}

impl Printer {
    fn setup(&mut self, seed: u64, declarations: &[Event]) -> Result<(), Unprintable> {
        self.code.uses("lockstep", &["ComputeClient"]);
        self.code.uses("lockstep_sim", &["SimConfig", "SimDevice"]);
        for declaration in declarations {
            match declaration {
                Event::Device(d) => self.device(seed, d.device),
                Event::Kernel { hash, def } => {
                    let json = serde_json::to_string(def).map_err(|err| {
                        Unprintable::Unsupported(format!("kernel {}: {err}", def.name))
                    })?;
                    let var = format!("kernel{}", self.kernels.len());
                    self.code.uses("lockstep", &["Kernel"]);
                    self.code.line(format!("// `{}`, as recorded.", def.name));
                    self.code.line(format!(
                        "let {var} = Kernel::new(serde_json::from_str(r##\"{json}\"##).unwrap()).unwrap();"
                    ));
                    self.kernels.insert(*hash, var);
                }
                Event::Process { .. } | Event::Call { .. } | Event::Outcome { .. } => {}
            }
        }
        self.code.line("");
        Ok(())
    }

    /// Recorded device `d`, a simulator seeded as the explorer seeds it.
    fn device(&mut self, seed: u64, d: u32) {
        let lines = [
            format!("let device{d} = SimDevice::new(SimConfig {{"),
            format!("    watchdog_ns: {WATCHDOG_NS},"),
            format!("    ..SimConfig::new({})", seed.wrapping_add(u64::from(d))),
            "});".to_owned(),
            format!("let probe{d} = device{d}.probe();"),
            format!("let client{d} = ComputeClient::inline(device{d}, options);"),
        ];
        for line in lines {
            self.code.line(line);
        }
        self.devices.push(d);
    }

    /// The client variable of `call`'s device and stream, defined at its first use.
    fn client(&mut self, call: &RecordedCall) -> String {
        let key = (call.device, call.stream);
        if let Some(var) = self.clients.get(&key) {
            return var.clone();
        }
        let var = format!("stream{}", self.clients.len());
        self.code.uses("lockstep", &["StreamId"]);
        self.code.line(format!(
            "// Recorded thread {}'s stream {} of device {}.",
            call.thread, call.stream, call.device
        ));
        self.code
            .line(format!("let mut {var} = client{}.clone();", call.device));
        self.code
            .line(format!("{var}.set_stream(StreamId({}));", call.stream));
        self.clients.insert(key, var.clone());
        var
    }

    /// A handle of recorded `range` of `device`: the buffer's own (cloned) or a slice of it.
    fn view(&self, device: u32, range: &Range) -> Result<String, Unprintable> {
        let (var, whole) = self.handle(device, range)?;
        Ok(if whole { format!("{var}.clone()") } else { var })
    }

    /// A reference to the handle of recorded `range` of `device`.
    fn view_ref(&self, device: u32, range: &Range) -> Result<String, Unprintable> {
        Ok(format!("&{}", self.handle(device, range)?.0))
    }

    /// The buffer's variable, if `range` is all of it (`true`), else a slice of it.
    fn handle(&self, device: u32, range: &Range) -> Result<(String, bool), Unprintable> {
        let (var, size) = self.buffers.get(&(device, range.buffer)).ok_or_else(|| {
            Unprintable::Unsupported(format!(
                "buffer {} is not made by a printed call",
                range.buffer
            ))
        })?;
        Ok(if range.offset == 0 && range.len == *size {
            (var.clone(), true)
        } else {
            let slice = format!("{var}.slice({}, {}).unwrap()", range.offset, range.len);
            (slice, false)
        })
    }

    fn call(&mut self, call: &RecordedCall) -> Result<(), Unprintable> {
        if let Op::Refused { name, .. } = &call.op {
            self.code.line(format!(
                "// Call {}: `{name}`, refused when recorded: not run.",
                call.call
            ));
            return Ok(());
        }
        let client = self.client(call);
        self.code.line(format!(
            "// Call {} ({} on thread {}).",
            call.call,
            call.op.kind(),
            call.thread
        ));
        let statement = self.statement(call, &client)?;
        self.code.line(statement);
        Ok(())
    }

    /// The statement making `call` on `client`, asserting its recorded outcome.
    fn statement(&mut self, call: &RecordedCall, client: &str) -> Result<String, Unprintable> {
        let device = call.device;
        Ok(match &call.op {
            Op::Create {
                buffer,
                bytes,
                data,
            } => {
                let var = format!("buffer{buffer}");
                let made = match data {
                    None => format!("{client}.empty({bytes})"),
                    Some(data) => format!("{client}.create({})", self.data(data)?),
                };
                self.buffers
                    .insert((device, *buffer), (var.clone(), *bytes));
                format!("let {var} = {made}.unwrap();")
            }
            Op::Write { range, data } => {
                let view = self.view_ref(device, range)?;
                format!("{client}.write({view}, {}).unwrap();", self.data(data)?)
            }
            Op::Launch { .. } => self.launch(call, client)?,
            Op::Read { ranges } => self.read(call, client, ranges)?,
            Op::Compile { kernel } => {
                let var = self.kernel(*kernel)?;
                waited(call, &format!("{client}.compile(&{var})"))
            }
            Op::Flush => waited(call, &format!("{client}.flush()")),
            Op::Sync => waited(call, &format!("{client}.sync()")),
            Op::SyncAll => waited(call, &format!("{client}.sync_all()")),
            Op::Release { buffer } => match self.buffers.remove(&(device, *buffer)) {
                Some((var, _)) => format!("drop({var});"),
                None => "// (a release of a buffer no printed call made)".to_owned(),
            },
            Op::GraphPrepare
            | Op::StartCapture
            | Op::StopCapture
            | Op::GraphReplay { .. }
            | Op::GraphRelease { .. }
            | Op::Refused { .. }
            | Op::Other { .. } => {
                return Err(Unprintable::Unsupported(format!(
                    "call {}: `{}` has no printed form",
                    call.call,
                    call.op.kind()
                )));
            }
        })
    }

    fn kernel(&self, hash: u64) -> Result<String, Unprintable> {
        (self.kernels.get(&hash).cloned()).ok_or_else(|| {
            Unprintable::Unsupported(format!("kernel {hash:#018x} was not recorded"))
        })
    }

    /// `call`, a launch, on `client`.
    fn launch(&mut self, call: &RecordedCall, client: &str) -> Result<String, Unprintable> {
        let Op::Launch {
            kernel,
            count,
            bindings,
            params,
            dry_run,
        } = &call.op
        else {
            return Err(Unprintable::Unsupported(format!(
                "call {} is no launch",
                call.call
            )));
        };
        let device = call.device;
        if *dry_run {
            return Err(Unprintable::Unsupported(
                "a dry run has no printed form".to_owned(),
            ));
        }
        let kernel = self.kernel(*kernel)?;
        self.code
            .uses("lockstep", &["CubeCount", "KernelArguments"]);
        let count = match count {
            Count::Static([x, y, z]) => format!("CubeCount::Static({x}, {y}, {z})"),
            Count::Dynamic(range) => format!("CubeCount::Dynamic({})", self.view(device, range)?),
        };
        let mut args = "KernelArguments::new()".to_owned();
        for range in bindings {
            args += &format!(".binding({})", self.view_ref(device, range)?);
        }
        for param in params {
            args += &format!(".param({})", self.scalar(*param)?);
        }
        Ok(format!(
            "{client}.launch(&{kernel}, {count}, {args}).unwrap();"
        ))
    }

    fn scalar(&mut self, value: Scalar) -> Result<String, Unprintable> {
        self.code.uses("lockstep::kernel", &["Scalar"]);
        match value {
            Scalar::U32(v) => Ok(format!("Scalar::U32({v})")),
            Scalar::I32(v) => Ok(format!("Scalar::I32({v})")),
            Scalar::F32(v) => Ok(format!("Scalar::F32(f32::from_bits({:#x}))", v.to_bits())),
            Scalar::F16(_) | Scalar::BF16(_) => Err(Unprintable::Unsupported(
                "half-float parameters have no printed form".to_owned(),
            )),
        }
    }

    /// A read of `ranges`, asserted to return what the recording says it returned.
    fn read(
        &mut self,
        call: &RecordedCall,
        client: &str,
        ranges: &[Range],
    ) -> Result<String, Unprintable> {
        let views: Vec<String> = (ranges.iter())
            .map(|r| self.view(call.device, r))
            .collect::<Result<_, _>>()?;
        self.code.uses("lockstep", &["block_on"]);
        let read = format!("block_on({client}.read_async(vec![{}]))", views.join(", "));
        Ok(match &call.outcome {
            Some(Outcome::Read(reads)) => {
                self.code
                    .uses("lockstep::record", &["ReadHashes", "chunk_hashes"]);
                let expected: Vec<String> = (reads.iter())
                    .map(|read| {
                        let h = &read.hashes;
                        let chunks: Vec<String> =
                            h.chunks.iter().map(|c| format!("{c:#018x}")).collect();
                        format!(
                            "ReadHashes {{ len: {}, chunks: vec![{}] }}",
                            h.len,
                            chunks.join(", ")
                        )
                    })
                    .collect();
                format!(
                    "assert_eq!(\n        {read}.map(|read| read.iter().map(|b| chunk_hashes(b)).collect::<Vec<_>>()).ok(),\n        Some(vec![{}]),\n        \"read of call {} on thread {} differs from the recorded run\"\n    );",
                    expected.join(", "),
                    call.call,
                    call.thread
                )
            }
            _ => waited(call, &read),
        })
    }

    /// `data` as a `Bytes` expression: `u32` words where it is made of them.
    fn data(&mut self, data: &Data) -> Result<String, Unprintable> {
        let Data::Bytes(bytes) = data else {
            return Err(Unprintable::Unsupported(
                "data recorded only as a hash has no printed form".to_owned(),
            ));
        };
        self.code.uses("lockstep", &["Bytes"]);
        if bytes.len() % 4 != 0 {
            let items: Vec<String> = bytes.iter().map(u8::to_string).collect();
            return Ok(format!("Bytes::from_bytes_vec(vec![{}])", items.join(", ")));
        }
        let words: Vec<u32> = (bytes.chunks_exact(4))
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect();
        Ok(match words.first() {
            Some(&first) if words.iter().all(|&w| w == first) => {
                format!("Bytes::from_elems::<u32>(&[{first}; {}])", words.len())
            }
            _ => format!("Bytes::from_elems::<u32>(&[{}])", list(&words)),
        })
    }

    /// Every stream synced (as the explorer's drain), every buffer dropped, then the
    /// simulators' verdicts.
    fn teardown(&mut self) {
        self.code.line("");
        self.code
            .line("// The explorer's drain: every stream synced until it succeeds.");
        for var in self.clients.values() {
            self.code.line(format!(
                "for _ in 0..{DRAIN_SYNCS} {{ if {var}.sync().is_ok() {{ break; }} }}"
            ));
        }
        for (var, _) in self.buffers.values() {
            self.code.line(format!("drop({var});"));
        }
        for d in &self.devices {
            self.code
                .line(format!("let observed = probe{d}.observations();"));
            self.code
                .line("assert!(!observed.watchdog_fired, \"hang: the watchdog fired\");");
            self.code.line(
                "assert!(observed.reports.is_empty(), \"sanitizer: {:?}\", observed.reports);",
            );
        }
    }
}

/// A waiting call's statement, asserting its recorded outcome (none: not asserted).
fn waited(call: &RecordedCall, expression: &str) -> String {
    match &call.outcome {
        Some(Outcome::Ok | Outcome::Read(_)) => format!("{expression}.unwrap();"),
        Some(Outcome::Err(err)) => format!(
            "assert!({expression}.is_err(), \"call {} returned an error when recorded: {}\");",
            call.call,
            err.escape_debug()
        ),
        None => format!("let _ = {expression};"),
    }
}
