//! setData calls that wait together share a `multi`, against a real server:
//! each caller gets its own Stat or error, a failing call leaves the
//! others applied, and the server sees one request per batch.

mod common;

use common::{builder, connect, create_bobs_node, mk, proxy, server};
use zklock::proto::OpCode;
use zklock::testing::set_data_together;
use zklock::Error;

const NODES: usize = 20;

fn node(i: usize) -> String {
    format!("/w/n{i:02}")
}

fn value(i: usize) -> Vec<u8> {
    format!("new value of n{i:02}").into_bytes()
}

/// `/w/n00` to `/w/n19`, empty.
fn populate(client: &zklock::Client) {
    mk(client, "/w", b"");
    for i in 0..NODES {
        mk(client, &node(i), b"");
    }
}

/// A setData of `values[i]` to `paths[i]` for each i, with no expected
/// version.
fn unconditional<'a>(
    paths: &'a [String],
    values: &'a [Vec<u8>],
) -> Vec<(&'a str, &'a [u8], Option<i32>)> {
    paths
        .iter()
        .zip(values)
        .map(|(p, v)| (p.as_str(), v.as_slice(), None))
        .collect()
}

#[test]
fn writes_submitted_together_share_requests_and_a_failing_one_fails_alone() {
    let zk = server();
    let gate = proxy(&zk);
    let client = connect(&gate.connect_string());
    populate(&client);
    let owner = create_bobs_node(&zk, "/w/vault", b"bob's");
    let seen = || {
        (
            gate.requests_seen(OpCode::Multi.code()),
            gate.requests_seen(OpCode::SetData.code()),
        )
    };
    let before = seen();

    // 20 nodes, one missing and one not writable: 16 writes in the first
    // batch, 6 in the second. Each failure fails its batch on the server;
    // the other writes go again.
    let mut paths: Vec<String> = (0..NODES).map(node).collect();
    paths.insert(3, "/w/missing".into());
    paths.insert(11, "/w/vault".into());
    let values: Vec<Vec<u8>> = paths.iter().map(|p| p.as_bytes().to_vec()).collect();
    let results = set_data_together(&client, &unconditional(&paths, &values));

    assert_eq!(results.len(), NODES + 2);
    for (path, result) in paths.iter().zip(&results) {
        match path.as_str() {
            "/w/missing" => assert_eq!(result, &Err(Error::NoNode)),
            "/w/vault" => assert_eq!(result, &Err(Error::NoAuth)),
            _ => {
                let stat = result.as_ref().expect("write");
                assert_eq!(stat.version, 1, "{path}");
                assert_eq!(stat.data_length as usize, path.len(), "{path}");
                // Each caller's Stat is its own node's, as the server has it.
                let (data, now) = client.get_data(path).expect("read back");
                assert_eq!(data, path.as_bytes());
                assert_eq!(&now, stat, "{path}");
            }
        }
    }
    assert_eq!(
        owner.get_data("/w/vault").expect("vault").0,
        b"bob's",
        "the refused write left the vault alone"
    );
    // A multi of the first 16 writes, refused for /w/missing, the first
    // failure in it (the server does not look at /w/vault after it), and
    // one of the last 6, applied. The other 15 go again as one multi,
    // refused for /w/vault, and the 14 left as one more: 4 multis, and no
    // plain setData.
    assert_eq!(
        (seen().0 - before.0, seen().1 - before.1),
        (4, 0),
        "multis and plain setData calls for 22 writes"
    );
}

#[test]
fn a_versioned_write_behind_a_write_of_its_node_meets_that_write() {
    let zk = server();
    let client = connect(&zk.connect_string());
    populate(&client);
    let writes: [(&str, &[u8], Option<i32>); 3] = [
        ("/w/n00", b"first", Some(0)),
        // Expects version 0, which the write before it changes: alone
        // after it, it fails, and so it does here.
        ("/w/n00", b"second", Some(0)),
        ("/w/n01", b"other", Some(0)),
    ];
    let results = set_data_together(&client, &writes);
    assert_eq!(results[0].as_ref().map(|s| s.version), Ok(1));
    assert_eq!(results[1], Err(Error::BadVersion));
    assert_eq!(results[2].as_ref().map(|s| s.version), Ok(1));
    assert_eq!(client.get_data("/w/n00").expect("n00").0, b"first");
}

#[test]
fn with_batching_off_every_write_is_its_own_request() {
    let zk = server();
    let gate = proxy(&zk);
    let client = builder()
        .batch_writes(false)
        .connect(&gate.connect_string())
        .expect("connect");
    populate(&client);
    let values: Vec<Vec<u8>> = (0..NODES).map(value).collect();
    let paths: Vec<String> = (0..NODES).map(node).collect();
    let before = gate.requests_seen(OpCode::SetData.code());
    let versions: Vec<i32> = set_data_together(&client, &unconditional(&paths, &values))
        .into_iter()
        .map(|r| r.expect("write").version)
        .collect();
    assert_eq!(versions, vec![1; NODES]);
    assert_eq!(gate.requests_seen(OpCode::Multi.code()), 0);
    assert_eq!(gate.requests_seen(OpCode::SetData.code()) - before, NODES);
}

#[test]
fn batched_writes_under_a_chroot_see_the_chroot() {
    let zk = server();
    let root = connect(&zk.connect_string());
    mk(&root, "/app", b"");
    let client = connect(&format!("{}/app", zk.connect_string()));
    populate(&client);
    let writes: [(&str, &[u8], Option<i32>); 3] = [
        ("/w/n01", b"one", None),
        ("/w/n02", b"two", None),
        ("/w/none", b"lost", None),
    ];
    let results = set_data_together(&client, &writes);
    assert_eq!(results[0].as_ref().map(|s| s.version), Ok(1));
    assert_eq!(results[1].as_ref().map(|s| s.version), Ok(1));
    assert_eq!(results[2], Err(Error::NoNode));
    assert_eq!(
        root.get_data("/app/w/n02").expect("n02 from root").0,
        b"two"
    );
}

#[test]
fn sixteen_threads_writing_through_one_client_each_land_every_write() {
    const THREADS: usize = 16;
    const WRITES: usize = 200;
    let zk = server();
    let client = connect(&zk.connect_string());
    populate(&client);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let client = &client;
            scope.spawn(move || {
                // Thread t owns n<t>: its versions count its own writes,
                // checked against the version it expects each time.
                for w in 0..WRITES {
                    let data = format!("thread {t} write {w}");
                    let version = i32::try_from(w).expect("small");
                    let stat = client
                        .set_data(&node(t), data.as_bytes(), Some(version))
                        .expect("write");
                    assert_eq!(stat.version, version + 1, "thread {t}, write {w}");
                }
            });
        }
    });
    for t in 0..THREADS {
        let (data, stat) = client.get_data(&node(t)).expect("read back");
        assert_eq!(data, format!("thread {t} write {}", WRITES - 1).as_bytes());
        assert_eq!(stat.version, i32::try_from(WRITES).expect("small"));
    }
}
