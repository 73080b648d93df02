//! A one-value channel: the reply path of blocking actor calls. The receiver can block
//! ([`Receiver::recv`]) or be awaited (it implements [`Future`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use crate::sync::{Arc, Condvar, Mutex, lock, wait};

struct Slot<T> {
    value: Option<T>,
    /// False once the sender was used or dropped; with `value == None` that means no value
    /// will ever come.
    sender_alive: bool,
    waker: Option<Waker>,
}

struct Shared<T> {
    slot: Mutex<Slot<T>>,
    ready: Condvar,
}

/// The sending half; dropping it without sending disconnects the receiver.
pub(crate) struct Sender<T> {
    shared: Arc<Shared<T>>,
}

/// The receiving half.
pub(crate) struct Receiver<T> {
    shared: Arc<Shared<T>>,
}

impl<T> std::fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Receiver")
    }
}

/// The sender went away without sending: the task that owned it panicked or was dropped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Disconnected;

pub(crate) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let shared = Arc::new(Shared {
        slot: Mutex::new(Slot {
            value: None,
            sender_alive: true,
            waker: None,
        }),
        ready: Condvar::new(),
    });
    (
        Sender {
            shared: shared.clone(),
        },
        Receiver { shared },
    )
}

impl<T> Sender<T> {
    pub(crate) fn send(self, value: T) {
        lock(&self.shared.slot).value = Some(value);
        // Drop wakes the receiver.
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut slot = lock(&self.shared.slot);
            slot.sender_alive = false;
            slot.waker.take()
        };
        self.shared.ready.notify_all();
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Receiver<T> {
    /// Blocks until the value arrives or the sender is gone.
    pub(crate) fn recv(self) -> Result<T, Disconnected> {
        let mut slot = lock(&self.shared.slot);
        loop {
            if let Some(value) = slot.value.take() {
                return Ok(value);
            }
            if !slot.sender_alive {
                return Err(Disconnected);
            }
            slot = wait(&self.shared.ready, slot);
        }
    }
}

impl<T> Future for Receiver<T> {
    type Output = Result<T, Disconnected>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = lock(&self.shared.slot);
        if let Some(value) = slot.value.take() {
            return Poll::Ready(Ok(value));
        }
        if !slot.sender_alive {
            return Poll::Ready(Err(Disconnected));
        }
        slot.waker = Some(cx.waker().clone());
        Poll::Pending
    }
}
