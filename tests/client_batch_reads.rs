//! Reads that wait together share a `multiRead`, against a real server:
//! each caller gets its own data or error, in order, and the server sees
//! one request per batch.

mod common;

use common::{builder, connect, create_bobs_node, mk, proxy, server};
use zklock::proto::{OpCode, Stat};
use zklock::testing::get_data_together;
use zklock::Error;

const NODES: usize = 20;

fn node(i: usize) -> String {
    format!("/b/n{i:02}")
}

fn value(i: usize) -> Vec<u8> {
    format!("value of n{i:02}").into_bytes()
}

/// `/b/n00` to `/b/n19`, each with its own data; `/b/n05` is written once
/// more, so its Stat differs from the others'.
fn populate(client: &zklock::Client) {
    mk(client, "/b", b"");
    for i in 0..NODES {
        mk(client, &node(i), &value(i));
    }
    client.set_data(&node(5), &value(5), None).expect("set n05");
}

#[test]
fn reads_submitted_together_share_requests_and_each_gets_its_own_outcome() {
    let zk = server();
    let gate = proxy(&zk);
    let client = connect(&gate.connect_string());
    populate(&client);
    create_bobs_node(&zk, "/b/vault", b"hidden");
    let before = (
        gate.requests_seen(OpCode::MultiRead.code()),
        gate.requests_seen(OpCode::GetData.code()),
    );

    // 20 nodes, one missing and one unreadable: 16 reads in the first
    // batch, 6 in the second.
    let mut paths: Vec<String> = (0..NODES).map(node).collect();
    paths.insert(3, "/b/missing".into());
    paths.insert(11, "/b/vault".into());
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let results = get_data_together(&client, &refs);

    assert_eq!(results.len(), NODES + 2);
    for (path, result) in paths.iter().zip(&results) {
        match path.as_str() {
            "/b/missing" => assert_eq!(result, &Err(Error::NoNode)),
            "/b/vault" => assert_eq!(result, &Err(Error::NoAuth)),
            _ => {
                let i: usize = path["/b/n".len()..].parse().expect("node number");
                let (data, stat) = result.as_ref().expect("read");
                assert_eq!(data, &value(i), "{path}");
                assert_eq!(stat.version, i32::from(i == 5), "{path}");
                assert_eq!(stat.data_length as usize, value(i).len(), "{path}");
            }
        }
    }
    // The Stat is the node's own: the same as a read alone gives.
    let (_, alone): (Vec<u8>, Stat) = client.get_data(&node(7)).expect("n07 alone");
    assert_eq!(results[8].as_ref().expect("n07").1, alone);
    assert_eq!(
        (
            gate.requests_seen(OpCode::MultiRead.code()) - before.0,
            gate.requests_seen(OpCode::GetData.code()) - before.1,
        ),
        (2, 1),
        "two multiReads for 22 reads, and the lone read of n07"
    );
}

#[test]
fn with_batching_off_every_read_is_its_own_request() {
    let zk = server();
    let gate = proxy(&zk);
    let client = builder()
        .batch_reads(false)
        .connect(&gate.connect_string())
        .expect("connect");
    populate(&client);
    let paths: Vec<String> = (0..NODES).map(node).collect();
    let refs: Vec<&str> = paths.iter().map(String::as_str).collect();
    let before = gate.requests_seen(OpCode::GetData.code());
    let results = get_data_together(&client, &refs);
    let data: Vec<Vec<u8>> = results.into_iter().map(|r| r.expect("read").0).collect();
    assert_eq!(data, (0..NODES).map(value).collect::<Vec<_>>());
    assert_eq!(gate.requests_seen(OpCode::MultiRead.code()), 0);
    assert_eq!(gate.requests_seen(OpCode::GetData.code()) - before, NODES);
}

#[test]
fn batched_reads_under_a_chroot_see_the_chroot() {
    let zk = server();
    let root = connect(&zk.connect_string());
    mk(&root, "/app", b"");
    let client = connect(&format!("{}/app", zk.connect_string()));
    populate(&client);
    let results = get_data_together(&client, &["/b/n01", "/b/n02", "/b/none"]);
    assert_eq!(results[0].as_ref().expect("n01").0, value(1));
    assert_eq!(results[1].as_ref().expect("n02").0, value(2));
    assert_eq!(results[2], Err(Error::NoNode));
    assert_eq!(
        root.get_data("/app/b/n02").expect("n02 from root").0,
        value(2)
    );
}

#[test]
fn sixteen_threads_reading_through_one_client_each_get_their_own_nodes() {
    const THREADS: usize = 16;
    const READS: usize = 300;
    let zk = server();
    let client = connect(&zk.connect_string());
    populate(&client);
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let client = &client;
            scope.spawn(move || {
                for r in 0..READS {
                    let i = (t + r) % NODES;
                    if r % 7 == 0 {
                        let children = client.get_children("/b").expect("children");
                        assert_eq!(children.len(), NODES);
                    } else {
                        let (data, _) = client.get_data(&node(i)).expect("read");
                        assert_eq!(data, value(i), "thread {t}, read {r}");
                    }
                }
            });
        }
    });
}
