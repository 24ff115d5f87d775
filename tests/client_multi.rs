//! `multi` (atomic: every op applied or none, with per-op results) and
//! `multi_read` (independent reads) against a real server.

mod common;

use common::{connect, mk, open, server};
use zklock::{Acl, CreateMode, Error, Id, Op, OpOutcome, ReadOp, ReadOutcome};

#[test]
fn multi_applies_every_op_and_reports_each_result() {
    let zk = server();
    let c = connect(&zk.connect_string());
    mk(&c, "/mt", b"");
    mk(&c, "/mt/existing", b"old");
    mk(&c, "/mt/doomed", b"");

    let results = c
        .multi(&[
            Op::create("/mt/a", b"a".to_vec(), open(), CreateMode::Persistent),
            Op::create(
                "/mt/s-",
                Vec::new(),
                open(),
                CreateMode::PersistentSequential,
            ),
            Op::create("/mt/box", Vec::new(), open(), CreateMode::Container),
            Op::create("/mt/eph", Vec::new(), open(), CreateMode::Ephemeral),
            Op::set_data("/mt/existing", b"new".to_vec(), Some(0)),
            // A check sees the earlier ops of the same multi.
            Op::check("/mt/existing", Some(1)),
            Op::check("/mt/a", Some(0)),
            Op::delete("/mt/doomed", Some(0)),
        ])
        .expect("multi");
    assert_eq!(results.len(), 8);
    assert_eq!(
        results[0],
        OpOutcome::Created {
            path: "/mt/a".into(),
            stat: None
        }
    );
    // The parent's cversion counts the create just before, in the same multi.
    assert_eq!(
        results[1],
        OpOutcome::Created {
            path: "/mt/s-0000000003".into(),
            stat: None
        }
    );
    let OpOutcome::Created {
        path,
        stat: Some(box_stat),
    } = &results[2]
    else {
        panic!("a container create returns a Stat: {:?}", results[2]);
    };
    assert_eq!(path, "/mt/box");
    assert_eq!(box_stat.version, 0);
    assert!(matches!(&results[3], OpOutcome::Created { path, .. } if path == "/mt/eph"));
    let OpOutcome::DataSet(set_stat) = &results[4] else {
        panic!("setData result: {:?}", results[4]);
    };
    assert_eq!((set_stat.version, set_stat.data_length), (1, 3));
    assert_eq!(results[5], OpOutcome::Checked);
    assert_eq!(results[6], OpOutcome::Checked);
    assert_eq!(results[7], OpOutcome::Deleted);

    // All of it is visible to another session, with one zxid for the lot.
    let other = connect(&zk.connect_string());
    let (data, a_stat) = other.get_data("/mt/a").expect("created");
    assert_eq!(data, b"a");
    let (data, stat) = other.get_data("/mt/existing").expect("set");
    assert_eq!((data.as_slice(), stat.version), (&b"new"[..], 1));
    assert_eq!(stat.mzxid, a_stat.czxid, "one transaction");
    assert_eq!(other.exists("/mt/doomed").expect("exists"), None);
    let eph = other.exists("/mt/eph").expect("exists").expect("ephemeral");
    assert_eq!(eph.ephemeral_owner, c.session_id());
    let mut children = other.get_children("/mt").expect("children");
    children.sort();
    assert_eq!(children, ["a", "box", "eph", "existing", "s-0000000003"]);

    // An empty multi succeeds without a round trip.
    assert_eq!(c.multi(&[]), Ok(Vec::new()));
}

#[test]
fn a_failed_multi_names_the_op_and_applies_nothing() {
    let zk = server();
    let c = connect(&zk.connect_string());
    mk(&c, "/mf", b"");
    mk(&c, "/mf/x", b"orig");
    mk(&c, "/mf/full", b"");
    mk(&c, "/mf/full/kid", b"");
    c.create("/mf/eph", b"", &open(), CreateMode::Ephemeral)
        .expect("ephemeral");
    let before = c.get_children_with_stat("/mf").expect("children").1;

    let cases: Vec<(Vec<Op>, usize, Error)> = vec![
        (
            vec![
                Op::create("/mf/new", Vec::new(), open(), CreateMode::Persistent),
                Op::set_data("/mf/x", b"changed".to_vec(), None),
                Op::check("/mf/x", Some(5)),
                Op::delete("/mf/full/kid", None),
            ],
            2,
            Error::BadVersion,
        ),
        (
            vec![
                Op::delete("/mf/missing", None),
                Op::create("/mf/new", Vec::new(), open(), CreateMode::Persistent),
            ],
            0,
            Error::NoNode,
        ),
        (
            vec![
                Op::create("/mf/new", Vec::new(), open(), CreateMode::Persistent),
                Op::set_data("/mf/x", b"changed".to_vec(), Some(0)),
                Op::create("/mf/x", Vec::new(), open(), CreateMode::Persistent),
            ],
            2,
            Error::NodeExists,
        ),
        (
            vec![
                Op::set_data("/mf/x", b"changed".to_vec(), None),
                Op::delete("/mf/full", None),
            ],
            1,
            Error::NotEmpty,
        ),
        (
            vec![
                Op::create("/mf/new", Vec::new(), open(), CreateMode::Persistent),
                Op::create("/mf/eph/kid", Vec::new(), open(), CreateMode::Persistent),
            ],
            1,
            Error::NoChildrenForEphemerals,
        ),
        (
            vec![
                Op::create("/mf/new", Vec::new(), open(), CreateMode::Persistent),
                Op::set_data("/mf/x", b"changed".to_vec(), Some(3)),
            ],
            1,
            Error::BadVersion,
        ),
        (
            // The first op's own effect would make the second one valid,
            // and the third fails: still nothing is applied.
            vec![
                Op::create("/mf/new", Vec::new(), open(), CreateMode::Persistent),
                Op::create("/mf/new/kid", Vec::new(), open(), CreateMode::Persistent),
                Op::check("/mf/new/missing", Some(0)),
            ],
            2,
            Error::NoNode,
        ),
    ];
    for (ops, index, error) in cases {
        match c.multi(&ops) {
            Err(Error::MultiFailed { index: i, error: e }) => {
                assert_eq!((i, *e), (index, error.clone()), "{ops:?}");
            }
            other => panic!("{ops:?} gave {other:?}"),
        }
        // Nothing was applied.
        assert_eq!(c.exists("/mf/new").expect("exists"), None, "{ops:?}");
        let (data, stat) = c.get_data("/mf/x").expect("get_data");
        assert_eq!(
            (data.as_slice(), stat.version),
            (&b"orig"[..], 0),
            "{ops:?}"
        );
        assert!(
            c.exists("/mf/full/kid").expect("exists").is_some(),
            "{ops:?}"
        );
        let after = c.get_children_with_stat("/mf").expect("children").1;
        assert_eq!(
            (after.cversion, after.pzxid),
            (before.cversion, before.pzxid)
        );
    }

    // Ops the server would refuse are caught before anything is sent.
    assert!(matches!(
        c.multi(&[
            Op::create("/mf/ok", Vec::new(), open(), CreateMode::Persistent),
            Op::delete("relative", None),
        ]),
        Err(Error::InvalidPath { .. })
    ));
    assert!(matches!(
        c.multi(&[Op::create(
            "/mf/ok",
            Vec::new(),
            Vec::new(),
            CreateMode::Persistent
        )]),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        c.multi(&[Op::create(
            "/mf/ok",
            Vec::new(),
            open(),
            CreateMode::PersistentWithTtl
        )]),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(c.exists("/mf/ok").expect("exists"), None);
}

#[test]
fn multi_read_reports_each_read_on_its_own() {
    let zk = server();
    let c = connect(&zk.connect_string());
    mk(&c, "/r", b"root");
    mk(&c, "/r/a", b"alpha");
    mk(&c, "/r/b", b"");
    let write_only = [Acl {
        perms: zklock::perms::WRITE,
        id: Id::new("world", "anyone"),
    }];
    c.create("/r/locked", b"secret", &write_only, CreateMode::Persistent)
        .expect("a node nobody may read");

    let results = c
        .multi_read(&[
            ReadOp::GetData("/r/a".into()),
            ReadOp::GetData("/r/missing".into()),
            ReadOp::GetChildren("/r".into()),
            ReadOp::GetChildren("/r/missing".into()),
            ReadOp::GetData("/r/locked".into()),
            ReadOp::GetData("/r".into()),
        ])
        .expect("multiRead");
    assert_eq!(results.len(), 6);
    let Ok(ReadOutcome::Data(data, stat)) = &results[0] else {
        panic!("{:?}", results[0]);
    };
    assert_eq!((data.as_slice(), stat.data_length), (&b"alpha"[..], 5));
    assert_eq!(results[1], Err(Error::NoNode));
    let Ok(ReadOutcome::Children(children)) = &results[2] else {
        panic!("{:?}", results[2]);
    };
    let mut children = children.clone();
    children.sort();
    assert_eq!(children, ["a", "b", "locked"]);
    assert_eq!(results[3], Err(Error::NoNode));
    assert_eq!(results[4], Err(Error::NoAuth));
    let Ok(ReadOutcome::Data(data, stat)) = &results[5] else {
        panic!("{:?}", results[5]);
    };
    assert_eq!((data.as_slice(), stat.num_children), (&b"root"[..], 3));

    assert_eq!(c.multi_read(&[]), Ok(Vec::new()));
    assert!(matches!(
        c.multi_read(&[ReadOp::GetData("/r/".into())]),
        Err(Error::InvalidPath { .. })
    ));
}
