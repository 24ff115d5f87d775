//! Chroot connect strings: every path in requests, results and watch events
//! is relative to the chroot, and the nodes live under it on the server.

mod common;

use common::{builder, connect, expect_event, expect_silence, mk, open, proxy, server};
use zklock::{AddWatchMode, CreateMode, Error, EventType, Op, OpOutcome, ReadOp, ReadOutcome};

fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v
}

#[test]
fn paths_in_results_and_events_are_relative_to_the_chroot() {
    let zk = server();
    let root = connect(&zk.connect_string());
    mk(&root, "/app", b"app");
    mk(&root, "/app/sub", b"");
    let c = connect(&format!("{}/app", zk.connect_string()));
    assert_eq!(c.chroot(), Some("/app"));

    // Creates return chroot-relative paths; the nodes are at the full path.
    assert_eq!(
        c.create("/x", b"1", &open(), CreateMode::Persistent),
        Ok("/x".into())
    );
    let (path, stat) = c
        .create_with_stat("/q-", b"", &open(), CreateMode::PersistentSequential)
        .expect("sequential create2");
    assert_eq!(path, "/q-0000000002");
    assert_eq!(
        root.get_data("/app/x").expect("visible at the full path").0,
        b"1"
    );
    assert_eq!(
        root.exists("/app/q-0000000002").expect("exists"),
        Some(stat)
    );
    c.create("/e", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");

    // "/" is the chroot itself.
    assert_eq!(c.get_data("/").expect("the chroot node").0, b"app");
    assert_eq!(
        sorted(c.get_children("/").expect("children")),
        ["e", "q-0000000002", "sub", "x"]
    );
    assert_eq!(c.get_all_children_number("/").expect("count"), 4);
    assert_eq!(c.get_ephemerals("/").expect("ephemerals"), ["/e"]);
    c.sync("/").expect("sync");

    // A node made at the full path is seen through the chroot.
    mk(&root, "/app/sub/deep", b"d");
    assert_eq!(c.get_data("/sub/deep").expect("get_data").0, b"d");
    assert_eq!(c.exists("/app").expect("exists"), None, "no /app/app");

    // multi and multi_read.
    let results = c
        .multi(&[
            Op::create("/m-", Vec::new(), open(), CreateMode::PersistentSequential),
            Op::create("/box", Vec::new(), open(), CreateMode::Container),
            Op::set_data("/x", b"2".to_vec(), Some(0)),
            Op::check("/sub/deep", Some(0)),
            Op::delete("/sub/deep", None),
        ])
        .expect("multi");
    assert!(
        matches!(&results[0], OpOutcome::Created { path, .. } if path == "/m-0000000004"),
        "{results:?}"
    );
    assert!(matches!(&results[1], OpOutcome::Created { path, .. } if path == "/box"));
    assert_eq!(root.get_data("/app/x").expect("get_data").0, b"2");
    assert_eq!(root.exists("/app/sub/deep").expect("exists"), None);
    assert!(root.exists("/app/m-0000000004").expect("exists").is_some());
    let reads = c
        .multi_read(&[
            ReadOp::GetData("/x".into()),
            ReadOp::GetChildren("/sub".into()),
        ])
        .expect("multiRead");
    assert!(matches!(&reads[0], Ok(ReadOutcome::Data(d, _)) if d == b"2"));
    assert_eq!(reads[1], Ok(ReadOutcome::Children(Vec::new())));
    match c.multi(&[Op::delete("/x", Some(9))]) {
        Err(Error::MultiFailed { index: 0, error }) => assert_eq!(*error, Error::BadVersion),
        other => panic!("{other:?}"),
    }

    // Watches: events carry chroot-relative paths, "/" for the chroot.
    let (_, _, data_w) = c.get_data_w("/x").expect("data watch");
    let (_, child_w) = c.get_children_w("/").expect("child watch on the chroot");
    let (none, exist_w) = c.exists_w("/later").expect("exists watch");
    assert_eq!(none, None);
    // On a second connection: a 3.8 server keeps one watch mode per
    // connection and path, so a recursive watch on "/" would absorb the
    // child watch above.
    let c2 = connect(&format!("{}/app", zk.connect_string()));
    let recursive = c2
        .add_watch("/", AddWatchMode::PersistentRecursive)
        .expect("recursive watch on the chroot");
    root.set_data("/app/x", b"3", None).expect("set_data");
    mk(&root, "/app/later", b"");
    mk(&root, "/outside", b"");
    root.set_data("/outside", b"o", None)
        .expect("set_data outside");
    root.sync("/").expect("sync");
    c.sync("/").expect("a round trip after the changes");
    c2.sync("/").expect("a round trip after the changes");
    expect_event(&data_w, EventType::NodeDataChanged, "/x");
    expect_event(&exist_w, EventType::NodeCreated, "/later");
    expect_event(&child_w, EventType::NodeChildrenChanged, "/");
    expect_event(&recursive, EventType::NodeDataChanged, "/x");
    expect_event(&recursive, EventType::NodeCreated, "/later");
    // Nothing from outside the chroot.
    expect_silence(&recursive, "the recursive watch");

    // Deletes, and a chroot whose node does not exist.
    c.delete("/x", None).expect("delete");
    assert_eq!(root.exists("/app/x").expect("exists"), None);
    let ghost = connect(&format!("{}/ghost", zk.connect_string()));
    assert_eq!(ghost.get_children("/"), Err(Error::NoNode));
    assert_eq!(
        ghost.create("/a", b"", &open(), CreateMode::Persistent),
        Err(Error::NoNode)
    );
    mk(&root, "/ghost", b"");
    assert_eq!(
        ghost.create("/a", b"", &open(), CreateMode::Persistent),
        Ok("/a".into())
    );

    // A nested chroot.
    let nested = connect(&format!("{}/app/sub", zk.connect_string()));
    assert_eq!(
        nested.create("/n", b"", &open(), CreateMode::Ephemeral),
        Ok("/n".into())
    );
    assert!(c.exists("/sub/n").expect("exists").is_some());
    assert!(root.exists("/app/sub/n").expect("exists").is_some());
    assert_eq!(nested.get_ephemerals("/").expect("ephemerals"), ["/n"]);
}

#[test]
fn ephemerals_outside_the_chroot_are_not_listed_under_it() {
    let zk = server();
    let root = connect(&zk.connect_string());
    mk(&root, "/app", b"");
    // A session made through a proxy, then left cut off there, so that a
    // client with a chroot can take it over.
    let gate = proxy(&zk);
    let owner = connect(&gate.connect_string());
    for path in ["/app/e", "/apple", "/app-x"] {
        owner
            .create(path, b"", &open(), CreateMode::Ephemeral)
            .expect("ephemeral");
    }
    gate.refuse(true);
    gate.cut();
    let view = builder()
        .session(owner.session_id(), owner.session_password())
        .connect(&format!("{}/app", zk.connect_string()))
        .expect("take the session over under a chroot");
    assert_eq!(view.session_id(), owner.session_id());

    // The server matches "/app" as a plain prefix: "/apple" and "/app-x"
    // are not below the chroot, and no chroot-relative path names them.
    assert_eq!(view.get_ephemerals("/").expect("ephemerals"), ["/e"]);
    assert_eq!(view.get_ephemerals("/e").expect("ephemerals"), ["/e"]);
    assert_eq!(
        sorted(root.get_ephemerals("/").expect("the root's own")),
        Vec::<String>::new()
    );
    view.close().expect("close the shared session");
    assert_eq!(root.exists("/apple").expect("exists"), None);
}

/// A delete of `/` under a chroot goes to the server's root, which it
/// refuses (`BadArguments`), as without a chroot: the chroot node stays,
/// alone or in a `multi`. Before, it went as a delete of the chroot node
/// itself, which an empty one did not survive (the Java client sends the
/// root too).
#[test]
fn deleting_the_root_under_a_chroot_leaves_the_chroot_node() {
    let zk = server();
    let root = connect(&zk.connect_string());
    mk(&root, "/empty-app", b"");
    let c = connect(&format!("{}/empty-app", zk.connect_string()));
    assert_eq!(c.delete("/", None), Err(Error::BadArguments));
    let multi = c.multi(&[Op::Delete {
        path: "/".into(),
        version: None,
    }]);
    assert_eq!(
        multi,
        Err(Error::MultiFailed {
            index: 0,
            error: Box::new(Error::BadArguments)
        })
    );
    assert!(root.exists("/empty-app").expect("exists").is_some());
}

/// Under a chroot, a sequential create at `/` is refused before sending:
/// the server would append the number to the chroot's own name, making a
/// sibling of the chroot outside it (the Java client sends it so).
#[test]
fn a_sequential_create_at_the_chroot_itself_is_refused() {
    let zk = server();
    let root = connect(&zk.connect_string());
    mk(&root, "/seq-app", b"");
    let before = sorted(root.get_children("/").expect("children"));
    let c = connect(&format!("{}/seq-app", zk.connect_string()));
    let refused = |r: Result<String, Error>| {
        assert!(
            matches!(&r, Err(Error::InvalidPath { path, reason })
                if path == "/" && reason.contains("outside the chroot")),
            "{r:?}"
        );
    };
    refused(c.create("/", b"", &open(), CreateMode::PersistentSequential));
    refused(c.create("/", b"", &open(), CreateMode::EphemeralSequential));
    let multi = c.multi(&[Op::create(
        "/",
        b"".to_vec(),
        open(),
        CreateMode::PersistentSequential,
    )]);
    assert!(
        matches!(&multi, Err(Error::InvalidPath { path, .. }) if path == "/"),
        "{multi:?}"
    );
    assert_eq!(sorted(root.get_children("/").expect("children")), before);
    assert!(c.get_children("/").expect("children").is_empty());
}
