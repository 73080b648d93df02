use super::*;

const A: StreamId = StreamId(0);
const B: StreamId = StreamId(1);

#[test]
fn sizes_are_classed_against_the_pool_edges() {
    let edges = [4096, 1 << 18];
    let classes: Vec<Arg> = [0, 4, 4092, 4096, 4100, 4104, (1 << 18) + 4, 64]
        .into_iter()
        .map(|b| size_class(b, &edges))
        .collect();
    assert_eq!(
        classes,
        [
            Arg::Empty,
            Arg::One,
            Arg::BelowEdge,
            Arg::AtEdge,
            Arg::AboveEdge,
            Arg::Ordinary,
            Arg::AboveEdge,
            Arg::Ordinary
        ]
    );
}

fn hit_count(hits: &Hits, cell: Cell) -> u64 {
    hits.count(Space::get().index(cell).expect("a cell of the space"))
}

#[test]
fn a_buffer_is_own_until_another_stream_uses_it_and_queued_until_that_stream_waits() {
    let mut r = Recorder::default();
    let idle = StreamState::Idle;
    let held = Held::default();
    r.created(7, A);
    r.call(Method::WriteAt, (idle, A), Arg::One, &[(7, held)]);
    r.call(Method::ReadOne, (idle, B), Arg::Ordinary, &[(7, held)]);
    r.call(Method::Launch, (idle, A), Arg::Ordinary, &[(7, held)]);
    let cell = |method, s, relation| Cell::new(method, s, Arg::Ordinary, relation);
    assert_eq!(
        hit_count(
            &r.hits,
            Cell::new(Method::WriteAt, idle, Arg::One, Relation::Own)
        ),
        1
    );
    assert_eq!(
        hit_count(&r.hits, cell(Method::ReadOne, idle, Relation::OtherStream)),
        1
    );
    assert_eq!(
        hit_count(&r.hits, cell(Method::Launch, idle, Relation::OtherStream)),
        1
    );
    // A launched last and has not waited since: a drop now leaves work queued.
    r.dropped(idle, 7, held);
    r.call(Method::Sync, (idle, A), Arg::Any, &[]);
    r.dropped(idle, 7, held);
    r.dropped(
        idle,
        7,
        Held {
            by_graph: true,
            by_capture: false,
        },
    );
    let drop = |relation| Cell::new(Method::DropHandle, idle, Arg::Any, relation);
    assert_eq!(hit_count(&r.hits, drop(Relation::Queued)), 1);
    assert_eq!(hit_count(&r.hits, drop(Relation::Own)), 1);
    assert_eq!(hit_count(&r.hits, drop(Relation::LiveGraph)), 1);
}

#[test]
fn a_lost_device_is_one_cell_per_method_and_unlisted_cells_are_kept_apart() {
    let lost = Cell::new(Method::Launch, StreamState::Lost, Arg::View, Relation::Own);
    assert_eq!((lost.arg, lost.relation), (Arg::Any, Relation::None));
    let mut hits = Hits::default();
    hits.hit(lost);
    let unlisted = Cell::new(Method::Sync, StreamState::Idle, Arg::View, Relation::Own);
    hits.hit(unlisted);
    let mut merged = Hits::default();
    merged.merge(&hits);
    merged.merge(&hits);
    assert_eq!(hit_count(&merged, lost), 2);
    assert_eq!(
        merged.outside().iter().copied().collect::<Vec<_>>(),
        [unlisted]
    );
    assert!(!Report::new(&merged).passed());
}

#[test]
fn every_declaration_gives_a_reason_and_matches_some_cell() {
    let space = Space::get();
    for e in space::EXCLUDED {
        assert!(!e.reason.is_empty());
        assert!(
            space.cells.iter().any(|c| c.excluded == Some(e.reason)),
            "{} matches no cell first",
            e.reason
        );
    }
    for (methods, reason) in space::NOT_CALLED {
        assert!(!methods.is_empty() && !reason.is_empty());
    }
}
