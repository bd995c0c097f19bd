//! A request whose (group, resource) pair was seen before gets its metric labels
//! without allocating (`proxy::request_labels::ResourceLabels`, docs/wire.md §6): the labels
//! cost a lookup per request, never a string. Counted per thread by a counting global
//! allocator, so tests running beside it do not count.

use cborgate::negotiate::client::identify;
use cborgate::negotiate::route::Method;
use cborgate::negotiate::Route;
use cborgate::proxy::request_labels::{ApiLabels, RequestLabels, ResourceLabels};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: nothing to count while the thread is being torn down.
    let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Allocations on this thread while `f` runs.
fn allocations(f: impl FnOnce()) -> u64 {
    let before = ALLOCS.with(Cell::get);
    f();
    ALLOCS.with(Cell::get) - before
}

#[test]
fn labels_of_a_pair_seen_before_do_not_allocate() {
    let labels = ResourceLabels::new(2);
    let routes: Vec<Route> = [
        "/apis/apps/v1/namespaces/demo/deployments/web",
        "/apis/apps/v1/namespaces/demo/deployments/web/scale",
        "/api/v1/namespaces/demo/pods",
        // Beyond the cap of 2: (other).
        "/apis/stable.example.com/v1/crontabs",
        "/api/v1",
        "/version",
        "/api/v1/Not_A_Resource",
    ]
    .iter()
    .map(|p| Route::classify(p))
    .collect();
    let agents = [
        Some("kube-controller-manager/v1.35.2 (linux/amd64) kubernetes/abc/generic-garbage-collector"),
        Some("my-operator/v0.0.0-master+$Format:%H$"),
        None,
    ];
    // The first sighting of a pair interns it: that allocates, once.
    let first = allocations(|| {
        for r in &routes {
            std::hint::black_box(labels.request(
                r,
                Method::Post,
                Some("dryRun=All"),
                identify(agents[0]).family,
            ));
        }
    });
    assert!(first > 0, "the counter counts");
    assert_eq!(labels.tracked(), 2);
    let again = allocations(|| {
        for _ in 0..1000 {
            for r in &routes {
                for ua in agents {
                    let l =
                        labels.request(r, Method::Post, Some("dryRun=All"), identify(ua).family);
                    std::hint::black_box(RequestLabels::values(Some(l)));
                    std::hint::black_box(ApiLabels::values(Some(l)));
                }
            }
        }
    });
    assert_eq!(
        again, 0,
        "allocations for 21,000 requests to pairs seen before"
    );
}
