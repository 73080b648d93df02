//! The books' transitions, each driven by hand: no device, no cubecl client.

use cubecl_environment::backtrace::BackTrace;
use cubecl_runtime::id::KernelId;
use cubecl_runtime::memory_management::{ManagedMemoryHandle, ManagedMemoryId};
use cubecl_runtime::server::ServerError;

use super::{Books, Region};

fn memory(value: usize) -> ManagedMemoryId {
    ManagedMemoryId { value }
}

fn whole(value: usize) -> Region {
    Region {
        memory: memory(value),
        bytes: 0..16,
    }
}

fn error(reason: &str) -> ServerError {
    ServerError::Generic {
        reason: reason.to_owned(),
        backtrace: BackTrace::capture(),
    }
}

/// The report a read of `regions` gets, as text (`Ok` as `None`).
fn report(books: &Books, regions: &[Region]) -> Option<String> {
    books.report(regions).err().map(|e| e.to_string())
}

struct Copy;

#[test]
fn a_refused_launch_claims_its_outputs_and_nothing_else() {
    let mut books = Books::default();
    books.refused(&[whole(1)], error("refused-on-purpose"));
    let text = report(&books, &[whole(1)]).expect("the output carries the failure");
    assert!(
        text.contains("refused-on-purpose") && text.contains("failure #"),
        "{text}"
    );
    assert_eq!(
        report(&books, &[whole(2)]),
        None,
        "an untouched buffer reads"
    );
}

#[test]
fn a_refusal_that_claims_nothing_leaves_no_failure_behind() {
    let mut books = Books::default();
    books.refused(&[], error("dry"));
    assert_eq!(books.failures(), 0);
}

#[test]
fn a_host_write_or_an_accepted_launch_ends_the_claim_on_what_it_writes() {
    let mut books = Books::default();
    books.refused(&[whole(1), whole(2)], error("stale"));
    books.written(&whole(1));
    books.accepted(7, vec![whole(2)]);
    assert_eq!(report(&books, &[whole(1), whole(2)]), None);
    assert_eq!(books.failures(), 0, "nothing carries the failure any more");
}

#[test]
fn a_partial_write_ends_the_claim_on_its_bytes_only() {
    let mut books = Books::default();
    books.refused(&[whole(1)], error("stale"));
    books.written(&Region {
        memory: memory(1),
        bytes: 0..8,
    });
    assert_eq!(
        report(
            &books,
            &[Region {
                memory: memory(1),
                bytes: 0..8
            }]
        ),
        None
    );
    assert!(
        report(
            &books,
            &[Region {
                memory: memory(1),
                bytes: 8..16
            }]
        )
        .is_some()
    );
}

#[test]
fn a_skipped_launch_passes_the_failure_on_and_names_the_hop() {
    let mut books = Books::default();
    books.refused(&[whole(1)], error("root-cause"));
    let claim = books
        .claim(&[whole(1)])
        .expect("the input carries the failure");
    books.skipped(KernelId::new::<Copy>(), claim, &[whole(2)]);
    let text = report(&books, &[whole(2)]).expect("the skipped launch's output carries it");
    assert!(
        text.contains("root-cause") && text.matches("skipped `").count() == 1,
        "{text}"
    );
}

#[test]
fn a_drain_error_claims_the_outputs_of_the_streams_window_only() {
    let mut books = Books::default();
    books.accepted(1, vec![whole(1)]);
    books.accepted(2, vec![whole(2)]);
    assert_eq!(books.open_windows(), vec![1, 2]);
    books.drained_error(1, error("kernel fault"));
    books.drained(2);
    assert!(report(&books, &[whole(1)]).is_some_and(|t| t.contains("kernel fault")));
    assert_eq!(report(&books, &[whole(2)]), None);
    assert!(books.open_windows().is_empty(), "both windows closed");
}

#[test]
fn freeing_memory_releases_its_claims() {
    let mut books = Books::default();
    books.refused(&[whole(1)], error("stale"));
    books.accepted(3, vec![whole(1)]);
    books.refused(&[whole(1)], error("again"));
    books.freed(memory(1));
    assert_eq!(books.failures(), 0);
    assert!(!books.has_window(3), "a freed buffer leaves its window");
}

#[test]
fn memory_never_allocated_reports_why() {
    let mut books = Books::default();
    let handle = ManagedMemoryHandle::new();
    let id = handle.descriptor().id;
    books.unallocated(&handle, error("out of memory: 1 TiB"));
    let region = Region {
        memory: id,
        bytes: 0..4,
    };
    assert!(
        books.claim(std::slice::from_ref(&region)).is_some(),
        "a launch reading it skips"
    );
    let text = report(&books, &[region]).expect("its read fails");
    assert!(text.contains("1 TiB"), "{text}");
}
