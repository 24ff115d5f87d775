//! ACLs and authentication against a real server: digest credentials (at
//! connect and through add_auth), NoAuth, InvalidACL, whoAmI, AuthFailed,
//! and a server enforcing a scheme (-124).

mod common;

use common::{base64, builder, connect, digest_id, fails_fast, mk, open, server, sha1};
use zklock::{perms, Acl, ClientInfo, CreateMode, Error, Id, State};

fn info(scheme: &str, user: &str) -> ClientInfo {
    ClientInfo {
        auth_scheme: scheme.into(),
        user: user.into(),
    }
}

#[test]
fn sha1_and_base64_helpers_match_known_answers() {
    assert_eq!(base64(&sha1(b"abc")), "qZk+NkcGgWq6PiVxeFDCbJzQ2J0=");
    assert_eq!(base64(&sha1(b"")), "2jmj7l5rSw0yVb/vlWAYkK/YBwk=");
    assert_eq!(base64(b"ab"), "YWI=");
    assert_eq!(base64(b"a"), "YQ==");
}

#[test]
fn digest_acls_are_enforced() {
    let zk = server();
    let cs = zk.connect_string();
    let anonymous = connect(&cs);
    let bob = builder()
        .digest("bob", "secret")
        .connect(&cs)
        .expect("connect with digest credentials");

    // Identities: the ip scheme for everyone, plus digest for bob.
    assert_eq!(
        anonymous.who_am_i().expect("whoAmI"),
        [info("ip", "127.0.0.1")]
    );
    let mut bob_ids = bob.who_am_i().expect("whoAmI");
    bob_ids.sort_by(|a, b| a.auth_scheme.cmp(&b.auth_scheme));
    assert_eq!(bob_ids, [info("digest", "bob"), info("ip", "127.0.0.1")]);

    // A node only bob may use, with the id computed here; anyone may create
    // it (create needs CREATE on the parent only).
    let bob_only = vec![Acl {
        perms: perms::ALL,
        id: digest_id("bob", "secret"),
    }];
    anonymous
        .create("/vault", b"gold", &bob_only, CreateMode::Persistent)
        .expect("create a digest-protected node");

    // Without the credentials: NoAuth for every checked operation.
    assert_eq!(anonymous.get_data("/vault"), Err(Error::NoAuth));
    assert_eq!(anonymous.set_data("/vault", b"x", None), Err(Error::NoAuth));
    assert_eq!(anonymous.get_children("/vault"), Err(Error::NoAuth));
    assert_eq!(
        anonymous.get_acl("/vault").map(|(a, _)| a),
        Err(Error::NoAuth)
    );
    assert_eq!(
        anonymous.set_acl("/vault", &open(), None),
        Err(Error::NoAuth)
    );
    assert_eq!(
        anonymous.create("/vault/kid", b"", &open(), CreateMode::Persistent),
        Err(Error::NoAuth)
    );
    // A wrong password authenticates as a different digest id: still NoAuth.
    let impostor = connect(&cs);
    impostor
        .add_auth("digest", b"bob:wrong")
        .expect("digest auth never fails itself");
    assert_eq!(impostor.get_data("/vault"), Err(Error::NoAuth));

    // With them: everything.
    assert_eq!(bob.get_data("/vault").expect("bob reads").0, b"gold");
    bob.set_data("/vault", b"silver", None).expect("bob writes");
    bob.create("/vault/kid", b"", &open(), CreateMode::Persistent)
        .expect("bob creates");
    assert_eq!(
        bob.get_acl("/vault").expect("bob reads the ACL").0,
        bob_only
    );

    // add_auth on a live session grants the same, at once.
    anonymous
        .add_auth("digest", b"bob:secret")
        .expect("add digest credentials");
    assert_eq!(anonymous.get_data("/vault").expect("read").0, b"silver");
    let mut ids = anonymous.who_am_i().expect("whoAmI");
    ids.sort_by(|a, b| a.auth_scheme.cmp(&b.auth_scheme));
    assert_eq!(ids, [info("digest", "bob"), info("ip", "127.0.0.1")]);

    // The `auth` scheme stands for the creator's ids: the server stores bob's
    // digest, hashed exactly like digest_id above.
    bob.create("/mine", b"", &Acl::creator_all(), CreateMode::Persistent)
        .expect("create with CREATOR_ALL_ACL");
    let (acl, _) = bob.get_acl("/mine").expect("get_acl");
    assert_eq!(acl, bob_only);
    assert_eq!(impostor.get_data("/mine"), Err(Error::NoAuth));

    // Partial permissions: READ for anyone, everything for bob.
    let mixed = vec![
        Acl {
            perms: perms::READ,
            id: Id::new("world", "anyone"),
        },
        Acl {
            perms: perms::ALL,
            id: digest_id("bob", "secret"),
        },
    ];
    bob.set_acl("/mine", &mixed, Some(0)).expect("set_acl");
    let (data, stat) = impostor
        .get_data("/mine")
        .expect("get_data readable by anyone");
    assert_eq!((data.as_slice(), stat.aversion), (&b""[..], 1));
    assert_eq!(impostor.set_data("/mine", b"x", None), Err(Error::NoAuth));
    assert_eq!(
        impostor.delete("/mine", None).map(|_| ()),
        Ok(()),
        "delete checks the parent"
    );
}

#[test]
fn invalid_acls_are_refused_by_the_server() {
    let zk = server();
    let c = connect(&zk.connect_string());
    mk(&c, "/acl", b"");
    // `auth` with no authenticated id to stand for.
    assert_eq!(
        c.create("/acl/a", b"", &Acl::creator_all(), CreateMode::Persistent),
        Err(Error::InvalidAcl)
    );
    // A malformed digest id, and an unknown scheme.
    for id in [Id::new("digest", "no-colon"), Id::new("nosuchscheme", "x")] {
        let acl = [Acl {
            perms: perms::ALL,
            id: id.clone(),
        }];
        assert_eq!(
            c.create("/acl/a", b"", &acl, CreateMode::Persistent),
            Err(Error::InvalidAcl),
            "{id:?}"
        );
        assert_eq!(
            c.set_acl("/acl", &acl, None),
            Err(Error::InvalidAcl),
            "{id:?}"
        );
    }
    assert_eq!(c.exists("/acl/a").expect("exists"), None);
    assert_eq!(c.get_acl("/acl").expect("get_acl").0, open());
    // An empty ACL never reaches the server.
    assert!(matches!(
        c.create("/acl/a", b"", &[], CreateMode::Persistent),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(
        c.set_acl("/acl", &[], None),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(c.state(), State::Connected);
}

#[test]
fn a_failed_authentication_ends_the_session() {
    let zk = server();
    let c = connect(&zk.connect_string());
    let states = c.state_changes();
    assert_eq!(
        c.add_auth("nosuchscheme", b"whatever"),
        Err(Error::AuthFailed)
    );
    assert_eq!(
        common::states_until(&states, State::AuthFailed),
        [State::AuthFailed]
    );
    assert_eq!(c.state(), State::AuthFailed);
    fails_fast("get_data after AuthFailed", &Error::AuthFailed, || {
        c.get_data("/")
    });
    fails_fast(
        "wait_connected after AuthFailed",
        &Error::AuthFailed,
        || c.wait_connected(common::WAIT),
    );
    assert!(matches!(
        c.add_auth("", b"x"),
        Err(Error::InvalidArgument(_))
    ));
}

/// A server enforcing an authentication scheme (`enforce.auth.schemes`)
/// answers a request of a session without it with -124 and closes the
/// connection, not the session: the client resumes the session, and a
/// credential added then (sent first on the next handshake) lets the
/// session's later requests through. A client given it at connect is
/// never refused.
#[test]
fn an_enforced_scheme_refuses_requests_until_its_credential_is_added() {
    let zk = zklock::testing::TestServer::builder()
        .system_property("zookeeper.enforce.auth.enabled", "true")
        .system_property("zookeeper.enforce.auth.schemes", "digest")
        .start()
        .expect("start an enforcing server");
    let c = connect(&zk.connect_string());
    let session = c.session_id();
    assert_eq!(c.exists("/"), Err(Error::SessionClosedRequireSaslAuth));
    // Made before the I/O thread has seen the server close the connection,
    // it goes on that connection and fails with it; the credentials still
    // go first on the next handshake, before the next call.
    match c.add_auth("digest", b"alice:secret") {
        Ok(()) | Err(Error::ConnectionLoss) => {}
        Err(e) => panic!("add_auth: {e}"),
    }
    assert!(c.exists("/").expect("exists, authenticated").is_some());
    assert_eq!(c.session_id(), session, "the same session, resumed");
    let mut ids = c.who_am_i().expect("whoAmI");
    ids.sort_by(|a, b| a.auth_scheme.cmp(&b.auth_scheme));
    assert_eq!(ids, [info("digest", "alice"), info("ip", "127.0.0.1")]);

    let bob = builder()
        .digest("bob", "secret")
        .connect(&zk.connect_string())
        .expect("connect as bob");
    assert!(bob.exists("/").expect("exists").is_some());
}
