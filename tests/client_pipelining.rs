//! Pipelining: many threads share one client and one connection; every
//! reply reaches the thread that asked.

mod common;

use std::sync::{Arc, Barrier};
use std::time::Instant;

use common::{connect, mk, server};
use zklock::{CreateMode, Error, Op, OpOutcome};

const THREADS: usize = 32;
const OPS_PER_THREAD: usize = 1000;

#[test]
fn thirty_two_threads_each_get_their_own_replies() {
    let zk = server();
    let client = connect(&zk.connect_string());
    mk(&client, "/p", b"");
    for t in 0..THREADS {
        mk(&client, &format!("/p/t{t:02}"), b"init");
    }
    let session = client.session_id();
    let barrier = Arc::new(Barrier::new(THREADS));
    let started = Instant::now();
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let c = client.clone();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let me = format!("/p/t{t:02}");
                let mut sets = 0;
                let mut ops = 0;
                barrier.wait();
                while ops < OPS_PER_THREAD {
                    // Write a value only this thread writes, then read it back:
                    // a reply meant for another thread would carry another
                    // thread's value, version or path.
                    let value = format!("{t}:{sets}");
                    let stat = c
                        .set_data(&me, value.as_bytes(), Some(sets))
                        .expect("set_data");
                    sets += 1;
                    assert_eq!(stat.version, sets, "{me}: setData reply version");
                    assert_eq!(stat.data_length as usize, value.len());
                    let (data, stat) = c.get_data(&me).expect("get_data");
                    assert_eq!(String::from_utf8_lossy(&data), value, "{me}");
                    assert_eq!(stat.version, sets);
                    ops += 2;
                    match ops % 5 {
                        0 => {
                            let stat = c.exists(&me).expect("exists").expect("own node");
                            assert_eq!((stat.version, stat.num_children), (sets, 0));
                        }
                        1 => {
                            assert_eq!(c.get_children("/p").expect("children").len(), THREADS);
                        }
                        2 => {
                            assert_eq!(c.exists(&format!("{me}/none")).expect("exists"), None);
                        }
                        3 => {
                            assert_eq!(c.get_data(&format!("{me}/none")), Err(Error::NoNode));
                        }
                        _ => {
                            let results = c
                                .multi(&[Op::check(me.as_str(), Some(sets))])
                                .expect("multi check");
                            assert_eq!(results, [OpOutcome::Checked]);
                        }
                    }
                    ops += 1;
                }
                sets
            })
        })
        .collect();
    let mut expected = Vec::new();
    for (t, worker) in workers.into_iter().enumerate() {
        let sets = worker
            .join()
            .unwrap_or_else(|_| panic!("thread {t} panicked"));
        expected.push((t, sets));
    }
    eprintln!(
        "{} operations from {THREADS} threads in {:?}",
        THREADS * OPS_PER_THREAD,
        started.elapsed()
    );
    assert_eq!(client.session_id(), session, "one session throughout");
    assert_eq!(client.state(), zklock::State::Connected);

    // The exact final values, read by an independent client.
    let observer = connect(&zk.connect_string());
    for (t, sets) in expected {
        let (data, stat) = observer.get_data(&format!("/p/t{t:02}")).expect("get_data");
        assert_eq!(String::from_utf8_lossy(&data), format!("{t}:{}", sets - 1));
        assert_eq!(stat.version, sets);
    }
}

#[test]
fn concurrent_sequential_creates_get_distinct_numbers() {
    let zk = server();
    let client = connect(&zk.connect_string());
    mk(&client, "/q", b"");
    let workers: Vec<_> = (0..8)
        .map(|t| {
            let c = client.clone();
            std::thread::spawn(move || {
                (0..100)
                    .map(|i| {
                        let data = format!("{t}-{i}");
                        let path = c
                            .create(
                                "/q/n-",
                                data.as_bytes(),
                                &common::open(),
                                CreateMode::PersistentSequential,
                            )
                            .expect("create");
                        (path, data)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut all = Vec::new();
    for worker in workers {
        all.extend(worker.join().expect("worker"));
    }
    // Each create got back the path of the node holding its own data.
    for (path, data) in &all {
        assert_eq!(client.get_data(path).expect("get_data").0, data.as_bytes());
    }
    let mut numbers: Vec<String> = all.iter().map(|(p, _)| p.clone()).collect();
    numbers.sort();
    numbers.dedup();
    assert_eq!(numbers.len(), 800);
    assert_eq!(numbers.first().map(String::as_str), Some("/q/n-0000000000"));
    assert_eq!(numbers.last().map(String::as_str), Some("/q/n-0000000799"));
}
