//! Real ZooKeeper servers and a TCP fault proxy, for tests (feature `testing`).
