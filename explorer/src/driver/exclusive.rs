//! `exclusive`: a closure run while the device's actor is paused, judged by what it does
//! inside ([`Inside`]) and by whether the world's clients run on an actor thread.

use std::cell::Cell;
use std::panic::{self, PanicHookInfo};
use std::sync::Once;

use lockstep::{Bytes, ComputeClient, Device, ServerError};

use super::{Run, State};
use crate::coverage::{Arg, Method};
use crate::failure::{Check, ErrorKind, Side, Violation};
use crate::workload::Inside;

thread_local! {
    /// Set while this thread makes a call whose panic the driver expects and judges.
    static PANIC_EXPECTED: Cell<bool> = const { Cell::new(false) };
}

/// Runs `call`, keeping the panic hook quiet about a panic on this thread meanwhile: the
/// panic is the behaviour under test (returned as `TaskPanicked`), not news for the terminal.
/// Other threads' panics, and this thread's outside `call`, are printed as before.
fn with_expected_panic<R>(call: impl FnOnce() -> R) -> R {
    static QUIET_HOOK: Once = Once::new();
    QUIET_HOOK.call_once(|| {
        let printing = panic::take_hook();
        panic::set_hook(Box::new(move |info: &PanicHookInfo<'_>| {
            if !PANIC_EXPECTED.with(Cell::get) {
                printing(info);
            }
        }));
    });
    let before = PANIC_EXPECTED.with(|expected| expected.replace(true));
    let result = call();
    PANIC_EXPECTED.with(|expected| expected.set(before));
    result
}

/// Whether `result` is the `TaskPanicked` of a call that would have waited for the paused
/// actor: its message names `exclusive` (actor threads) or says the client would wait for
/// itself (inline).
fn refused_inside<T>(result: &Result<T, ServerError>) -> bool {
    matches!(
        result,
        Err(ServerError::TaskPanicked { message, .. })
            if message.contains("inside `exclusive`") || message.contains("wait for itself")
    )
}

impl<D: Device> Run<'_, D> {
    /// `exclusive` on `client`, doing `inside` with the buffer in `slot`.
    pub(super) fn exclusive(
        &self,
        state: &mut State<D>,
        client: &ComputeClient<D>,
        slot: usize,
        inside: Inside,
    ) -> Result<(), Violation> {
        let s = client.stream_id();
        state.hit(Method::Exclusive, s, Arg::Any, &[]);
        match inside {
            Inside::Returns => match client.exclusive(|| slot) {
                Ok(returned) if returned == slot => Ok(()),
                Ok(returned) => Err(Violation::new(
                    Check::WrongValue(Method::Exclusive),
                    format!("exclusive returned {returned}, its closure {slot}"),
                )),
                Err(e) => Err(Violation::refused(
                    Method::Exclusive,
                    Side::Explored,
                    "exclusive",
                    e,
                )),
            },
            Inside::Syncs => {
                let result = with_expected_panic(|| client.exclusive(|| client.sync()));
                expect_refused_inside(result.map(drop), "sync")
            }
            Inside::Writes { fill } if self.world.actor => {
                let written =
                    client.exclusive(|| self.write_at(state, client, slot, (0, 1), fill, false));
                written.map_err(|e| {
                    Violation::refused(Method::Exclusive, Side::Explored, "exclusive", e)
                })?
            }
            Inside::Writes { fill } => {
                let Some((handle, buf)) = state.in_slot(slot) else {
                    return Ok(());
                };
                // A buffer of no elements refuses the write at the call, before any wait.
                if state.model.len(buf) == 0 {
                    return Ok(());
                }
                let data = Bytes::from_elems(&self.fills.data(fill, 1));
                let result =
                    with_expected_panic(|| client.exclusive(|| client.write_at(&handle, 0, data)));
                expect_refused_inside(result.map(drop), "write_at")
            }
        }
    }
}

/// Judges an `exclusive` whose closure made `call`, which waits for the paused actor.
fn expect_refused_inside(result: Result<(), ServerError>, call: &str) -> Result<(), Violation> {
    if refused_inside(&result) {
        return Ok(());
    }
    Err(Violation::new(
        Check::WrongRefusal {
            call: Method::Exclusive,
            got: ErrorKind::of_result(&result),
        },
        format!(
            "a {call} inside exclusive must fail as TaskPanicked naming the mistake, got {result:?}"
        ),
    ))
}
