//! Process-wide registry of initialised devices, for [`ComputeClient::load`](crate::ComputeClient::load).
//! It holds weak references only: a registered device still shuts down with its last client.

use std::any::Any;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock, Weak};

use crate::device::Device;
use crate::ids::DeviceId;
use crate::sync::Arc;

type Entries = HashMap<DeviceId, Box<dyn Any + Send>>;

fn entries() -> &'static Mutex<Entries> {
    static ENTRIES: OnceLock<Mutex<Entries>> = OnceLock::new();
    ENTRIES.get_or_init(Default::default)
}

/// Unregistered clients get indices from here up, so they never collide with `init`'s.
const FIRST_ANONYMOUS_INDEX: u32 = 1 << 31;
static NEXT_ANONYMOUS: AtomicU32 = AtomicU32::new(FIRST_ANONYMOUS_INDEX);

/// Whether `id` was drawn by [`anonymous_id`]: a client not registered by `init`.
pub(crate) fn is_anonymous(id: DeviceId) -> bool {
    id.index >= FIRST_ANONYMOUS_INDEX
}

pub(crate) fn anonymous_id<D: Device>() -> DeviceId {
    DeviceId {
        type_id: D::TYPE_ID,
        index: NEXT_ANONYMOUS.fetch_add(1, Ordering::Relaxed),
    }
}

#[cfg(not(loom))]
pub(crate) fn register<T: Send + Sync + 'static>(id: DeviceId, shared: &Arc<T>) {
    let mut entries = entries().lock().unwrap_or_else(|p| p.into_inner());
    let alive = entries
        .get(&id)
        .and_then(|e| e.downcast_ref::<Weak<T>>())
        .is_some_and(|weak| weak.strong_count() > 0);
    assert!(
        !alive,
        "device {id} already has a live client: use ComputeClient::load({}) instead of init",
        id.index
    );
    entries.insert(id, Box::new(Arc::downgrade(shared)));
}

#[cfg(not(loom))]
pub(crate) fn lookup<T: Send + Sync + 'static>(id: DeviceId) -> Option<Arc<T>> {
    let entries = entries().lock().unwrap_or_else(|p| p.into_inner());
    entries.get(&id)?.downcast_ref::<Weak<T>>()?.upgrade()
}
