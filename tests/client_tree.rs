//! Whole paths at once: `ensure_path` makes a node with its missing
//! parents, `delete_recursive` deletes a node with everything below it.

mod common;

use std::time::Duration;

use common::{builder, connect, mk, open, poll_until, proxy, server, WAIT};
use zklock::proto::OpCode;
use zklock::testing::{Pause, PausePoint, ReleasedOnDrop};
use zklock::{perms, Acl, CreateMode, Error, Id};

#[test]
fn ensure_path_makes_each_missing_node_once_and_leaves_the_others() {
    let zk = server();
    let gate = proxy(&zk);
    let c = connect(&gate.connect_string());
    mk(&c, "/have", b"kept");
    let readable = vec![Acl {
        perms: perms::ALL,
        id: Id::new("world", "anyone"),
    }];
    let creates = gate.requests_seen(OpCode::Create.code());
    c.ensure_path("/have/a/b/c", &readable)
        .expect("ensure_path");
    // The full path first: refused (no parent), and its parent's too; then
    // the three missing nodes made top down: five creates.
    assert_eq!(gate.requests_seen(OpCode::Create.code()) - creates, 5);
    for path in ["/have/a", "/have/a/b", "/have/a/b/c"] {
        let (data, stat) = c.get_data(path).expect(path);
        assert_eq!(
            (data.as_slice(), stat.ephemeral_owner),
            (&b""[..], 0),
            "{path}"
        );
        assert_eq!(c.get_acl(path).expect("get_acl").0, readable, "{path}");
    }
    assert_eq!(c.get_data("/have").expect("get_data").0, b"kept");
    let before = c.exists("/have/a/b/c").expect("exists");

    // Already there: one exists, no create, and nothing changes.
    let creates = gate.requests_seen(OpCode::Create.code());
    let asked = gate.requests_seen(OpCode::Exists.code());
    c.ensure_path("/have/a/b/c", &open()).expect("again");
    assert_eq!(gate.requests_seen(OpCode::Create.code()) - creates, 0);
    assert_eq!(gate.requests_seen(OpCode::Exists.code()) - asked, 1);
    assert_eq!(c.exists("/have/a/b/c").expect("exists"), before);

    // An ephemeral node is a node there too; under it, nothing can be.
    c.create("/have/e", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    assert_eq!(c.ensure_path("/have/e", &open()), Ok(()));
    assert_eq!(
        c.ensure_path("/have/e/x/y", &open()),
        Err(Error::NoChildrenForEphemerals)
    );
    assert_eq!(c.exists("/have/e/x").expect("exists"), None);
    assert_eq!(c.ensure_path("/", &open()), Ok(()));
}

/// A path an administrator made under a parent that forbids creating is
/// there for `ensure_path`: the server would refuse a create of it for the
/// parent's ACL before looking for the node.
#[test]
fn ensure_path_of_a_path_there_under_a_parent_forbidding_creates_succeeds() {
    let zk = server();
    let c = connect(&zk.connect_string());
    mk(&c, "/locked", b"");
    mk(&c, "/locked/app", b"");
    let read_only = vec![Acl {
        perms: perms::READ,
        id: Id::new("world", "anyone"),
    }];
    c.set_acl("/locked", &read_only, None).expect("set_acl");
    assert_eq!(c.ensure_path("/locked/app", &open()), Ok(()));
    assert_eq!(c.ensure_path("/locked/other", &open()), Err(Error::NoAuth));
    assert_eq!(
        c.ensure_path("/locked/other/x", &open()),
        Err(Error::NoAuth)
    );
    assert_eq!(c.get_children("/locked").expect("children"), ["app"]);
}

#[test]
fn ensure_path_under_a_chroot_makes_nodes_in_it_and_needs_the_chroot_node() {
    let zk = server();
    let root = connect(&zk.connect_string());
    mk(&root, "/app", b"");
    let c = connect(&format!("{}/app", zk.connect_string()));
    c.ensure_path("/x/y", &open()).expect("ensure_path");
    assert!(root.exists("/app/x/y").expect("exists").is_some());
    assert_eq!(c.ensure_path("/", &open()), Ok(()));

    let gone = connect(&format!("{}/no-such-app", zk.connect_string()));
    assert_eq!(gone.ensure_path("/x/y", &open()), Err(Error::NoNode));
    assert_eq!(gone.ensure_path("/", &open()), Err(Error::NoNode));
    assert_eq!(root.exists("/no-such-app").expect("exists"), None);
}

#[test]
fn delete_recursive_deletes_a_wide_and_deep_tree_a_hundred_leaves_a_multi() {
    let zk = server();
    let gate = proxy(&zk);
    let c = connect(&gate.connect_string());
    let other = connect(&zk.connect_string());
    mk(&c, "/t", b"");
    mk(&c, "/t/wide", b"");
    for i in 0..250 {
        mk(&c, &format!("/t/wide/n{i:03}"), b"");
    }
    c.ensure_path("/t/deep/a/b/c", &open())
        .expect("ensure_path");
    // Another session's ephemeral node goes too.
    other
        .create("/t/deep/a/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    mk(&c, "/kept", b"");

    let multis = gate.requests_seen(OpCode::Multi.code());
    c.delete_recursive("/t").expect("delete_recursive");
    assert_eq!(c.exists("/t").expect("exists"), None);
    assert_eq!(
        c.exists("/kept").expect("exists").map(|s| s.num_children),
        Some(0)
    );
    // The wide directory's leaves: 100, 100 and 50. Then one multi for
    // each other listing: /t's [deep, wide], /deep's [a] and /a's [b, eph]
    // fail (each holds a node with children) and go one node at a time;
    // /b's [c] succeeds.
    let sent = gate.requests_seen(OpCode::Multi.code()) - multis;
    assert_eq!(sent, 3 + 1 + 1 + 1 + 1);

    // Gone already: nothing to do, and no error.
    assert_eq!(c.delete_recursive("/t"), Ok(()));
    assert_eq!(c.delete_recursive("/never/was"), Ok(()));
}

#[test]
fn delete_recursive_under_a_chroot_keeps_to_it_and_refuses_the_root() {
    let zk = server();
    let root = connect(&zk.connect_string());
    mk(&root, "/app", b"");
    mk(&root, "/app/sub", b"");
    mk(&root, "/app/sub/x", b"");
    mk(&root, "/sub", b"outside");
    let c = connect(&format!("{}/app", zk.connect_string()));
    c.delete_recursive("/sub").expect("delete_recursive");
    assert_eq!(root.exists("/app/sub").expect("exists"), None);
    assert!(root.exists("/app").expect("exists").is_some());
    assert_eq!(root.get_data("/sub").expect("untouched").0, b"outside");
    let refused = Err(Error::InvalidPath {
        path: "/".into(),
        reason: "the root cannot be deleted",
    });
    assert_eq!(c.delete_recursive("/"), refused);
    assert_eq!(root.delete_recursive("/"), refused);
    assert!(root.exists("/app").expect("exists").is_some());
}

/// With a `max_request` too small for a batch of deletes, the batch is
/// refused unsent, and its nodes are deleted one by one.
#[test]
fn delete_recursive_with_a_small_max_request_deletes_one_by_one() {
    let zk = server();
    let gate = proxy(&zk);
    let c = builder()
        .max_request(1024)
        .connect(&gate.connect_string())
        .expect("connect");
    mk(&c, "/small", b"");
    for i in 0..60 {
        mk(&c, &format!("/small/a-rather-long-child-name-{i:02}"), b"");
    }
    let (multis, deletes) = (
        gate.requests_seen(OpCode::Multi.code()),
        gate.requests_seen(OpCode::Delete.code()),
    );
    c.delete_recursive("/small").expect("delete_recursive");
    assert_eq!(c.exists("/small").expect("exists"), None);
    assert_eq!(
        gate.requests_seen(OpCode::Multi.code()),
        multis,
        "none sent"
    );
    // The refused delete of /small, its children, and /small again.
    assert_eq!(gate.requests_seen(OpCode::Delete.code()) - deletes, 62);
}

/// Runs `call` on a thread of its own with `point` armed `times` over, and
/// `act(k)` at the k-th stop there (from 1) while that thread waits.
/// Returns what the call returned, and how many of the armed stops it
/// reached.
fn with_stops<T: Send>(
    point: PausePoint,
    times: usize,
    call: impl FnOnce() -> T + Send,
    mut act: impl FnMut(usize),
) -> (T, usize) {
    std::thread::scope(|scope| {
        let (armed_tx, armed) = std::sync::mpsc::channel();
        let caller = scope.spawn(move || {
            let pauses: Vec<Pause> = (0..times).map(|_| Pause::arm(point)).collect();
            let _ = armed_tx.send(pauses);
            call()
        });
        // Released when dropped, a failed assertion included: the caller
        // is never left stopped.
        let pauses: Vec<ReleasedOnDrop> = armed
            .recv_timeout(WAIT)
            .expect("armed")
            .into_iter()
            .map(ReleasedOnDrop)
            .collect();
        let mut reached = 0;
        for (k, pause) in pauses.iter().enumerate() {
            // Stopped there, or returned without reaching it.
            let stopped = poll_until(WAIT, || {
                pause.0.wait_reached(Duration::ZERO) || caller.is_finished()
            });
            assert!(stopped, "stop {} neither reached nor passed", k + 1);
            if !pause.0.wait_reached(Duration::ZERO) {
                break;
            }
            reached += 1;
            act(k + 1);
            pause.0.release();
        }
        drop(pauses);
        (caller.join().expect("the caller's thread"), reached)
    })
}

/// A parent that another client deletes between its create and its
/// child's is made again; one deleted each time is given up on after ten
/// creates more than twice the path's depth, with `NoNode`.
#[test]
fn ensure_path_makes_a_parent_deleted_meanwhile_again_within_its_limit() {
    let zk = server();
    let gate = proxy(&zk);
    let c = connect(&gate.connect_string());
    let other = connect(&zk.connect_string());
    let delete = |path: &str| other.delete(path, None).expect("delete the parent");

    let creates = gate.requests_seen(OpCode::Create.code());
    let (made, stops) = with_stops(
        PausePoint::PathParentMade,
        1,
        || c.ensure_path("/again/b", &open()),
        |_| delete("/again"),
    );
    assert_eq!((made, stops), (Ok(()), 1));
    // b refused, /again made (then deleted), b refused, /again and b made.
    assert_eq!(gate.requests_seen(OpCode::Create.code()) - creates, 5);
    assert!(c.exists("/again/b").expect("exists").is_some());

    // Deleted after each of its creates: 2 * 2 + 10 creates, half of them
    // refused for the parent, the other half the parent's, then NoNode.
    let creates = gate.requests_seen(OpCode::Create.code());
    let (made, stops) = with_stops(
        PausePoint::PathParentMade,
        8,
        || c.ensure_path("/each-time/b", &open()),
        |_| delete("/each-time"),
    );
    assert_eq!((made, stops), (Err(Error::NoNode), 7));
    assert_eq!(gate.requests_seen(OpCode::Create.code()) - creates, 14);
    assert_eq!(c.exists("/each-time").expect("exists"), None);
}

/// A child created between a listing and the deletes that follow it is
/// deleted too, at the next listing; a node that gets a new child at each
/// listing is given up on after ten, with `NotEmpty`, and keeps its last
/// child.
#[test]
fn delete_recursive_deletes_children_made_meanwhile_within_ten_listings() {
    let zk = server();
    let c = connect(&zk.connect_string());
    let other = connect(&zk.connect_string());
    let add = |path: String| mk(&other, &path, b"");

    mk(&c, "/late", b"");
    mk(&c, "/late/first", b"");
    let (deleted, stops) = with_stops(
        PausePoint::SubtreeListed,
        3,
        || c.delete_recursive("/late"),
        |k| {
            if k == 1 {
                add("/late/second".into());
            }
        },
    );
    // Listed with [first], then with [second].
    assert_eq!((deleted, stops), (Ok(()), 2));
    assert_eq!(c.exists("/late").expect("exists"), None);

    mk(&c, "/busy", b"");
    mk(&c, "/busy/c0", b"");
    let (deleted, stops) = with_stops(
        PausePoint::SubtreeListed,
        11,
        || c.delete_recursive("/busy"),
        |k| add(format!("/busy/c{k}")),
    );
    assert_eq!((deleted, stops), (Err(Error::NotEmpty), 10));
    assert_eq!(
        c.get_children("/busy").expect("get_children"),
        ["c10".to_owned()]
    );
}
