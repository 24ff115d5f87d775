//! Every single-node operation against a real server: results, Stats, and
//! each server error code an operation can produce; all seven create modes.

mod common;

use std::time::Duration;

use common::{builder, connect, mk, open, server, wait_until, WAIT};
use zklock::testing::TestServer;
use zklock::{CreateMode, DecodeError, Error};

#[test]
fn crud_round_trip_with_stats() {
    let zk = server();
    let c = connect(&zk.connect_string());

    let (path, stat) = c
        .create_with_stat("/app", b"v0", &open(), CreateMode::Persistent)
        .expect("create2");
    assert_eq!(path, "/app");
    assert_eq!((stat.version, stat.cversion, stat.aversion), (0, 0, 0));
    assert_eq!((stat.data_length, stat.num_children), (2, 0));
    assert_eq!(stat.czxid, stat.mzxid);
    assert_eq!(stat.ephemeral_owner, 0);

    let exists = c.exists("/app").expect("exists").expect("the node exists");
    assert_eq!(exists, stat);
    assert_eq!(
        c.exists("/missing").expect("exists on a missing node"),
        None
    );

    let (data, read) = c.get_data("/app").expect("get_data");
    assert_eq!((data.as_slice(), &read), (&b"v0"[..], &stat));

    // Versioned and unversioned writes.
    let s1 = c
        .set_data("/app", b"v1", Some(0))
        .expect("set_data at version 0");
    assert_eq!((s1.version, s1.data_length), (1, 2));
    assert!(s1.mzxid > stat.mzxid);
    let s2 = c
        .set_data("/app", b"", None)
        .expect("set_data at any version");
    assert_eq!((s2.version, s2.data_length), (2, 0));
    assert_eq!(c.get_data("/app").expect("get_data").0, b"");

    // Children: names, counts, cversion.
    for name in ["b", "a", "c"] {
        assert_eq!(
            c.create(
                &format!("/app/{name}"),
                b"",
                &open(),
                CreateMode::Persistent
            )
            .expect("create a child"),
            format!("/app/{name}")
        );
    }
    let mut children = c.get_children("/app").expect("get_children");
    children.sort();
    assert_eq!(children, ["a", "b", "c"]);
    let (mut children2, parent) = c.get_children_with_stat("/app").expect("getChildren2");
    children2.sort();
    assert_eq!(children2, children);
    assert_eq!((parent.num_children, parent.cversion), (3, 3));
    assert_eq!(
        c.get_children("/app/a").expect("leaf children"),
        Vec::<String>::new()
    );

    // ACLs, with their own version.
    let (acl, acl_stat) = c.get_acl("/app").expect("get_acl");
    assert_eq!(acl, open());
    assert_eq!(acl_stat.aversion, 0);
    let read_only = zklock::Acl::read_unsafe();
    let s3 = c.set_acl("/app/a", &read_only, Some(0)).expect("set_acl");
    assert_eq!(s3.aversion, 1);
    assert_eq!(c.get_acl("/app/a").expect("get_acl").0, read_only);
    // READ only: writes are refused now, reads still work.
    assert_eq!(c.set_data("/app/a", b"x", None), Err(Error::NoAuth));
    let (data, stat) = c
        .get_data("/app/a")
        .expect("get_data under a READ-only ACL");
    assert_eq!((data.as_slice(), stat.aversion), (&b""[..], 1));

    c.sync("/app").expect("sync");
    c.sync("/").expect("sync on the root");

    // Versioned and unversioned deletes.
    c.delete("/app/a", Some(0)).expect("delete at version 0");
    c.delete("/app/b", None).expect("delete at any version");
    assert_eq!(c.exists("/app/b").expect("exists"), None);
    let (children, parent) = c.get_children_with_stat("/app").expect("getChildren2");
    assert_eq!(children, ["c"]);
    assert_eq!(parent.num_children, 1);

    // Another client sees the same tree.
    let other = connect(&zk.connect_string());
    assert_eq!(other.get_data("/app").expect("get_data").1.version, 2);
    assert_eq!(other.get_children("/app").expect("children"), ["c"]);
}

#[test]
fn every_error_code_an_operation_can_produce() {
    let zk = server();
    let c = connect(&zk.connect_string());
    mk(&c, "/e", b"data");
    mk(&c, "/e/child", b"");

    // NoNode: every operation on a missing node, and a create under one.
    let missing = "/e/missing";
    assert_eq!(c.get_data(missing), Err(Error::NoNode));
    assert_eq!(c.set_data(missing, b"x", None), Err(Error::NoNode));
    assert_eq!(c.delete(missing, None), Err(Error::NoNode));
    assert_eq!(c.get_children(missing), Err(Error::NoNode));
    assert_eq!(c.get_children_with_stat(missing), Err(Error::NoNode));
    assert_eq!(c.get_acl(missing), Err(Error::NoNode));
    assert_eq!(c.set_acl(missing, &open(), None), Err(Error::NoNode));
    assert_eq!(c.get_all_children_number(missing), Err(Error::NoNode));
    assert_eq!(
        c.create("/e/missing/child", b"", &open(), CreateMode::Persistent),
        Err(Error::NoNode)
    );
    assert_eq!(
        c.create_with_stat("/e/missing/child", b"", &open(), CreateMode::Persistent),
        Err(Error::NoNode)
    );

    // NodeExists, through create and create2.
    assert_eq!(
        c.create("/e/child", b"", &open(), CreateMode::Persistent),
        Err(Error::NodeExists)
    );
    assert_eq!(
        c.create_with_stat("/e", b"", &open(), CreateMode::Ephemeral)
            .map(|(p, _)| p),
        Err(Error::NodeExists)
    );

    // BadVersion: setData, delete and setACL with a stale version.
    assert_eq!(c.set_data("/e", b"x", Some(7)), Err(Error::BadVersion));
    assert_eq!(c.delete("/e/child", Some(3)), Err(Error::BadVersion));
    assert_eq!(c.set_acl("/e", &open(), Some(5)), Err(Error::BadVersion));
    // Nothing changed.
    let (data, stat) = c.get_data("/e").expect("get_data");
    assert_eq!(
        (data.as_slice(), stat.version, stat.aversion),
        (&b"data"[..], 0, 0)
    );

    // NotEmpty.
    assert_eq!(c.delete("/e", None), Err(Error::NotEmpty));
    assert!(c.exists("/e").expect("exists").is_some());

    // NoChildrenForEphemerals, for plain and sequential children.
    c.create("/e/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("create an ephemeral node");
    for mode in [CreateMode::Persistent, CreateMode::EphemeralSequential] {
        assert_eq!(
            c.create("/e/eph/kid", b"", &open(), mode),
            Err(Error::NoChildrenForEphemerals),
            "{mode:?}"
        );
    }

    // The root and the server's own nodes cannot be deleted.
    assert_eq!(c.delete("/", None), Err(Error::BadArguments));

    // Errors leave the connection usable: no reconnect happened.
    assert_eq!(c.state(), zklock::State::Connected);
    assert_eq!(c.get_children("/e").expect("children").len(), 2);
}

#[test]
fn all_seven_create_modes_on_a_default_server() {
    let zk = server();
    let c = connect(&zk.connect_string());
    let observer = connect(&zk.connect_string());
    mk(&c, "/m", b"");

    // PERSISTENT and EPHEMERAL, through create (opcode 1) and create2 (15).
    assert_eq!(
        c.create("/m/p", b"1", &open(), CreateMode::Persistent),
        Ok("/m/p".into())
    );
    let (_, stat) = c
        .create_with_stat("/m/p2", b"22", &open(), CreateMode::Persistent)
        .expect("create2");
    assert_eq!((stat.ephemeral_owner, stat.data_length), (0, 2));
    assert_eq!(
        c.create("/m/e", b"", &open(), CreateMode::Ephemeral),
        Ok("/m/e".into())
    );
    let (_, stat) = c
        .create_with_stat("/m/e2", b"", &open(), CreateMode::Ephemeral)
        .expect("create2 ephemeral");
    assert_eq!(stat.ephemeral_owner, c.session_id());
    let owner = observer.exists("/m/e").expect("exists").expect("ephemeral");
    assert_eq!(owner.ephemeral_owner, c.session_id());

    // The sequential modes: a 10-digit suffix, the parent's cversion before
    // the create (every child create counts, sequential or not).
    let parent = "/m/seq";
    mk(&c, parent, b"");
    let first = c
        .create(
            "/m/seq/job-",
            b"",
            &open(),
            CreateMode::PersistentSequential,
        )
        .expect("persistent sequential");
    assert_eq!(first, "/m/seq/job-0000000000");
    mk(&c, "/m/seq/plain", b"");
    let (third, stat) = c
        .create_with_stat("/m/seq/job-", b"", &open(), CreateMode::EphemeralSequential)
        .expect("ephemeral sequential through create2");
    assert_eq!(third, "/m/seq/job-0000000002");
    assert_eq!(stat.ephemeral_owner, c.session_id());
    // A path ending in '/' is a valid sequential prefix: the name is the number.
    let bare = c
        .create("/m/seq/", b"", &open(), CreateMode::PersistentSequential)
        .expect("sequential with an empty name prefix");
    assert_eq!(bare, "/m/seq/0000000003");
    // Without a chroot, `/` is a sequential prefix too: a number under the
    // root, as the Java client allows.
    let at_root = c
        .create("/", b"", &open(), CreateMode::EphemeralSequential)
        .expect("sequential create at the root");
    assert_eq!(at_root.len(), 11, "{at_root}");
    assert!(
        at_root[1..].bytes().all(|b| b.is_ascii_digit()),
        "{at_root}"
    );
    assert!(observer.exists(&at_root).expect("exists").is_some());
    c.delete(&at_root, None)
        .expect("delete the root's sequential node");
    let mut names = observer.get_children(parent).expect("children");
    names.sort();
    assert_eq!(
        names,
        ["0000000003", "job-0000000000", "job-0000000002", "plain"]
    );
    // Many sequential creates never collide.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..20 {
        let p = c
            .create("/m/seq/n-", b"", &open(), CreateMode::EphemeralSequential)
            .expect("sequential create");
        assert!(p.starts_with("/m/seq/n-") && p.len() == "/m/seq/n-".len() + 10);
        assert!(seen.insert(p));
    }

    // CONTAINER: create and create_with_stat use createContainer (that the
    // server really made containers is shown by its reaping them, in
    // `ttl_nodes_and_containers_on_an_extended_server`). Servers report no
    // owner for containers: the marker stays server-side.
    assert_eq!(
        c.create("/m/box", b"", &open(), CreateMode::Container),
        Ok("/m/box".into())
    );
    let (path, stat) = c
        .create_with_stat("/m/box2", b"", &open(), CreateMode::Container)
        .expect("createContainer with stat");
    assert_eq!((path.as_str(), stat.ephemeral_owner), ("/m/box2", 0));
    assert_eq!(observer.exists("/m/box2").expect("exists"), Some(stat));

    // The TTL modes: createTTL is refused by a server without extended types.
    for mode in [
        CreateMode::PersistentWithTtl,
        CreateMode::PersistentSequentialWithTtl,
    ] {
        assert_eq!(
            c.create_ttl("/m/ttl", b"", &open(), mode, Duration::from_secs(5)),
            Err(Error::Unimplemented),
            "{mode:?}"
        );
        // create and create2 cannot carry a TTL: refused before sending.
        assert!(matches!(
            c.create("/m/ttl", b"", &open(), mode),
            Err(Error::InvalidArgument(_))
        ));
        assert!(matches!(
            c.create_with_stat("/m/ttl", b"", &open(), mode),
            Err(Error::InvalidArgument(_))
        ));
    }
    // create_ttl only takes TTL modes and a TTL in range.
    for (mode, ttl) in [
        (CreateMode::Persistent, Duration::from_secs(1)),
        (CreateMode::PersistentWithTtl, Duration::ZERO),
        (
            CreateMode::PersistentWithTtl,
            Duration::from_millis(0xFF_FFFF_FFFF + 1),
        ),
    ] {
        assert!(
            matches!(
                c.create_ttl("/m/ttl", b"", &open(), mode, ttl),
                Err(Error::InvalidArgument(_))
            ),
            "{mode:?} {ttl:?}"
        );
    }
    assert_eq!(observer.exists("/m/ttl").expect("exists"), None);

    // The ephemeral nodes die with the session; the rest stay.
    c.close().expect("close");
    let mut left = observer.get_children("/m").expect("children");
    left.sort();
    assert_eq!(left, ["box", "box2", "p", "p2", "seq"]);
    let mut left = observer.get_children(parent).expect("children");
    left.sort();
    assert_eq!(left, ["0000000003", "job-0000000000", "plain"]);
}

#[test]
fn ttl_nodes_and_containers_on_an_extended_server() {
    let zk = TestServer::builder()
        .extended_types(true)
        .container_check_interval_ms(200)
        .start()
        .expect("start a server with extended types");
    let c = connect(&zk.connect_string());
    mk(&c, "/t", b"");

    let ttl = Duration::from_millis(600);
    let (path, stat) = c
        .create_ttl("/t/ttl", b"x", &open(), CreateMode::PersistentWithTtl, ttl)
        .expect("createTTL");
    assert_eq!(path, "/t/ttl");
    // Like containers, TTL nodes report no owner to clients.
    assert_eq!(
        (stat.version, stat.ephemeral_owner, stat.data_length),
        (0, 0, 1)
    );
    let (seq, _) = c
        .create_ttl(
            "/t/ttlseq-",
            b"",
            &open(),
            CreateMode::PersistentSequentialWithTtl,
            ttl,
        )
        .expect("createTTL sequential");
    assert_eq!(seq, "/t/ttlseq-0000000001");
    // A TTL node with a child stays; the others are reaped once the TTL
    // passes. One reaped before its child was made (a stall of the TTL's
    // length) is made again, at most three times.
    let kept = (0..3).any(|_| {
        c.create_ttl("/t/kept", b"", &open(), CreateMode::PersistentWithTtl, ttl)
            .expect("createTTL");
        match c.create("/t/kept/child", b"", &open(), CreateMode::Persistent) {
            Ok(_) => true,
            Err(Error::NoNode) => false,
            Err(e) => panic!("create /t/kept/child: {e}"),
        }
    });
    assert!(
        kept,
        "the TTL node reaped before its child was made, three times"
    );

    // A container goes once its last child is gone.
    c.create("/t/box", b"", &open(), CreateMode::Container)
        .expect("container");
    mk(&c, "/t/box/item", b"");
    c.delete("/t/box/item", None)
        .expect("delete the last child");

    wait_until(
        "the server to reap the TTL nodes and the container",
        WAIT,
        || {
            let children = c.get_children("/t").expect("children");
            children == ["kept"]
        },
    );
    assert!(c.exists("/t/kept/child").expect("exists").is_some());
}

#[test]
fn get_ephemerals_and_get_all_children_number() {
    let zk = server();
    let c = connect(&zk.connect_string());
    let other = connect(&zk.connect_string());
    mk(&c, "/eph", b"");
    mk(&c, "/eph/dir", b"");
    c.create("/eph/a", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    let seq = c
        .create("/eph/dir/s-", b"", &open(), CreateMode::EphemeralSequential)
        .expect("ephemeral sequential");
    c.create("/ephemeral-elsewhere", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    other
        .create("/eph/theirs", b"", &open(), CreateMode::Ephemeral)
        .expect("another session's ephemeral");

    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    // A plain string prefix: "/eph" also matches "/ephemeral-elsewhere".
    assert_eq!(
        sorted(c.get_ephemerals("/eph").expect("getEphemerals")),
        [
            "/eph/a".to_owned(),
            seq.clone(),
            "/ephemeral-elsewhere".into()
        ]
    );
    assert_eq!(
        c.get_ephemerals("/eph/dir").expect("getEphemerals"),
        std::slice::from_ref(&seq)
    );
    // A trailing '/' keeps to the subtree: "/eph/" does not match "/ephemeral-elsewhere".
    assert_eq!(
        sorted(c.get_ephemerals("/eph/").expect("getEphemerals")),
        ["/eph/a".to_owned(), seq.clone()]
    );
    assert_eq!(sorted(c.get_ephemerals("/").expect("all")).len(), 3);
    assert_eq!(
        other.get_ephemerals("/").expect("getEphemerals"),
        ["/eph/theirs"]
    );
    assert_eq!(
        c.get_ephemerals("/nothing-here").expect("getEphemerals"),
        Vec::<String>::new()
    );

    // Every descendant counts, at every level.
    assert_eq!(c.get_all_children_number("/eph").expect("count"), 4);
    assert_eq!(c.get_all_children_number("/eph/dir").expect("count"), 1);
    assert_eq!(c.get_all_children_number("/eph/a").expect("count"), 0);
}

/// A reply over `max_frame` (here a listing of a directory with many
/// children) fails its call with the limit, which asking again would not
/// change, not with `ConnectionLoss`. Its bytes are not read, so the
/// connection goes; the session lives on through the next one.
#[test]
fn a_reply_over_the_frame_limit_fails_its_call_with_the_limit() {
    let zk = server();
    let c = builder()
        .max_frame(1024)
        .connect(&zk.connect_string())
        .expect("connect");
    let session = c.session_id();
    mk(&c, "/big", b"");
    for i in 0..60 {
        let name = format!("/big/a-child-with-a-long-name-{i:02}");
        c.create(&name, b"", &open(), CreateMode::Persistent)
            .expect("create a child");
    }
    // The reply header (16 bytes), the count (4), and each name's length
    // (4) and 27 bytes.
    let listing = 16 + 4 + 60 * (4 + 27);
    assert_eq!(
        c.get_children("/big"),
        Err(Error::Protocol(DecodeError::FrameTooLarge {
            len: listing,
            max: 1024
        }))
    );
    assert!(c.exists("/big").expect("exists after").is_some());
    assert_eq!(c.session_id(), session);
    assert_eq!(
        c.get_children("/big/a-child-with-a-long-name-00"),
        Ok(vec![])
    );
}
