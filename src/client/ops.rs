//! The operations, each a blocking call.

#[cfg(feature = "testing")]
use std::sync::Arc;
use std::time::Duration;

use super::core::Watcher;
#[cfg(feature = "testing")]
use super::core::{Core, ReplySlot, Shared};
use super::path::validate;
use super::watch_receiver::watch_channel;
use super::{Client, WatchReceiver};
use crate::error::{malformed, Error, Result};
use crate::proto::{
    Acl, AddWatchMode, AddWatchRequest, AuthPacket, ClientInfo, CreateMode, CreateRequest,
    CreateTtlRequest, DeleteRequest, ExistsRequest, GetAclRequest, GetChildrenRequest,
    GetDataRequest, OpCode, PathRecord, RemoveWatchesRequest, Response, SetAclRequest,
    SetDataRequest, Stat, WatcherType,
};
use crate::session::{within_chroot, BatchRead, WatchKind, WatchRequest};

/// A created node's path and, when the reply carried it, its Stat.
pub(crate) type Created = (String, Option<Stat>);

/// The largest TTL the server accepts, in ms.
const MAX_TTL_MS: u128 = 0xFF_FFFF_FFFF;

impl Client {
    /// A new user watch's two ends, for a watch of one of `kinds` on
    /// `path`. The watchers of those kinds there whose receivers are gone
    /// are dropped first: a caller asking for a new watch each time round
    /// keeps one, not one per round, however long the node stays quiet.
    fn watch_channel(&self, path: &str, kinds: &[WatchKind]) -> Result<(Watcher, WatchReceiver)> {
        let server_path = self.server_path(path)?;
        let mut core = self.shared().core();
        for &kind in kinds {
            core.session
                .forget_watchers(kind, &server_path, Watcher::is_abandoned);
        }
        drop(core);
        let persistent = kinds
            .iter()
            .any(|k| matches!(k, WatchKind::Persistent | WatchKind::PersistentRecursive));
        let capacity = persistent.then_some(self.inner.watch_buffer);
        let (tx, rx) = watch_channel(std::sync::Arc::downgrade(&self.inner.shared), capacity);
        Ok((Watcher::Channel(tx), rx))
    }

    /// Validates a user path and adds the chroot.
    pub(crate) fn server_path(&self, path: &str) -> Result<String> {
        self.server_path_for(path, false)
    }

    fn server_path_for(&self, path: &str, sequential: bool) -> Result<String> {
        validate(path, sequential)?;
        Ok(match self.chroot() {
            None => path.to_owned(),
            // The server would append the number to the chroot's own name,
            // making a sibling of the chroot, outside it.
            Some(_) if path == "/" && sequential => {
                return Err(Error::InvalidPath {
                    path: path.to_owned(),
                    reason:
                        "under a chroot, a sequential node at '/' would be made outside the chroot",
                })
            }
            Some(chroot) if path == "/" => chroot.to_owned(),
            Some(chroot) => [chroot, path].concat(),
        })
    }

    /// The server path a delete of `path` (a user path) goes to. The root
    /// goes as the server's root even under a chroot, where it would
    /// otherwise name the chroot node: the server refuses it
    /// (`BadArguments`), as it refuses to delete its root, and the chroot
    /// node stays (so does the Java client's `delete`).
    pub(crate) fn delete_path(&self, path: &str) -> Result<String> {
        match path {
            "/" => Ok(path.to_owned()),
            _ => self.server_path(path),
        }
    }

    /// Removes the chroot from a path the server returned.
    pub(crate) fn client_path(&self, server_path: String) -> String {
        crate::session::strip_chroot(self.chroot(), server_path)
    }

    pub(crate) fn create_request(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<CreateRequest> {
        check_acl(acl)?;
        Ok(CreateRequest {
            path: self.server_path_for(path, mode.is_sequential())?,
            data: Some(data.to_vec()),
            acl: acl.to_vec(),
            mode,
        })
    }

    /// Creates a node and returns its path (with the sequence suffix for
    /// sequential modes). Containers use `createContainer`; TTL modes need
    /// [`Client::create_ttl`].
    pub fn create(&self, path: &str, data: &[u8], acl: &[Acl], mode: CreateMode) -> Result<String> {
        if mode.is_container() {
            return self.create_with_stat(path, data, acl, mode).map(|(p, _)| p);
        }
        reject_ttl(mode)?;
        let request = self.create_request(path, data, acl, mode)?;
        match self.shared().call(OpCode::Create, &request, None)? {
            Response::Create(r) => Ok(self.client_path(r.path)),
            _ => Err(malformed("create reply")),
        }
    }

    /// Creates a node and returns its path and Stat (`create2`, or
    /// `createContainer` for containers).
    pub fn create_with_stat(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
    ) -> Result<(String, Stat)> {
        reject_ttl(mode)?;
        let request = self.create_request(path, data, acl, mode)?;
        let op = if mode.is_container() {
            OpCode::CreateContainer
        } else {
            OpCode::Create2
        };
        match self.shared().call(op, &request, None)? {
            Response::Create2(r) => Ok((self.client_path(r.path), r.stat)),
            _ => Err(malformed("create2 reply")),
        }
    }

    /// Creates a TTL node (`PersistentWithTtl` or `PersistentSequentialWithTtl`):
    /// the server deletes it once it has had no children and no change for
    /// `ttl`. The server must run with `-Dzookeeper.extendedTypesEnabled=true`,
    /// otherwise this fails with `Unimplemented`.
    pub fn create_ttl(
        &self,
        path: &str,
        data: &[u8],
        acl: &[Acl],
        mode: CreateMode,
        ttl: Duration,
    ) -> Result<(String, Stat)> {
        if !mode.is_ttl() {
            return Err(Error::InvalidArgument(format!(
                "{mode:?} is not a TTL mode"
            )));
        }
        let ttl_ms = ttl.as_millis();
        if ttl_ms == 0 || ttl_ms > MAX_TTL_MS {
            return Err(Error::InvalidArgument(format!(
                "TTL must be between 1 ms and {MAX_TTL_MS} ms, not {ttl:?}"
            )));
        }
        let CreateRequest {
            path,
            data,
            acl,
            mode,
        } = self.create_request(path, data, acl, mode)?;
        let request = CreateTtlRequest {
            path,
            data,
            acl,
            mode,
            ttl: ttl_ms as i64,
        };
        match self.shared().call(OpCode::CreateTtl, &request, None)? {
            Response::Create2(r) => Ok((self.client_path(r.path), r.stat)),
            _ => Err(malformed("createTTL reply")),
        }
    }

    /// Deletes a node. `version` is the expected data version; `None` matches any.
    pub fn delete(&self, path: &str, version: Option<i32>) -> Result<()> {
        self.delete_server_path(&self.delete_path(path)?, version.unwrap_or(-1), None)
    }

    /// Deletes `path` (a server path) at `version`; with `session`, only in
    /// that session (see
    /// [`Shared::call_in_session`](super::core::Shared::call_in_session)).
    pub(crate) fn delete_server_path(
        &self,
        path: &str,
        version: i32,
        session: Option<u64>,
    ) -> Result<()> {
        let request = DeleteRequest {
            path: path.to_owned(),
            version,
        };
        self.shared()
            .call_in_session(session, OpCode::Delete, &request)
            .map(drop)
    }

    /// Deletes `path` without waiting: the delete is retried after every
    /// reconnect for as long as the session lives (and after a back-off
    /// when throttled), and is ordered before any later request of this
    /// client.
    pub(crate) fn delete_in_background(&self, server_path: String, session: u64) -> Result<()> {
        let now = std::time::Instant::now();
        self.shared().with_session(|s| {
            // Under the session's lock: a node of a session that a new one
            // has just replaced went with it.
            s.check_generation(session)?;
            s.submit_background_delete(now, server_path, -1)
        })
    }

    /// The node's Stat, or `None` if it does not exist.
    pub fn exists(&self, path: &str) -> Result<Option<Stat>> {
        self.exists_inner(path, None)
    }

    /// Like [`Client::exists`], and leaves a one-shot watch: NodeCreated if
    /// the node is missing; NodeDataChanged or NodeDeleted if it exists.
    pub fn exists_w(&self, path: &str) -> Result<(Option<Stat>, WatchReceiver)> {
        let (tx, rx) = self.watch_channel(path, &[WatchKind::Exist, WatchKind::Data])?;
        let stat = self.exists_inner(path, Some(tx))?;
        Ok((stat, rx))
    }

    pub(crate) fn exists_inner(
        &self,
        path: &str,
        watcher: Option<Watcher>,
    ) -> Result<Option<Stat>> {
        let path = self.server_path(path)?;
        let request = ExistsRequest {
            path: path.clone(),
            watch: watcher.is_some(),
        };
        let watch = watcher.map(|watcher| WatchRequest {
            kind: WatchKind::Exist,
            path,
            watcher,
        });
        match self.shared().call(OpCode::Exists, &request, watch) {
            Ok(Response::Exists(r)) => Ok(Some(r.stat)),
            Err(Error::NoNode) => Ok(None),
            Ok(_) => Err(malformed("exists reply")),
            Err(e) => Err(e),
        }
    }

    /// The node's data and Stat. A node created with null data reads as empty.
    pub fn get_data(&self, path: &str) -> Result<(Vec<u8>, Stat)> {
        self.get_data_inner(path, None)
    }

    /// Reads the data of each of `paths`, with every read submitted before
    /// any is written, as the reads of many callers at once may be: they
    /// share requests (see [`Config::batch_reads`](crate::Config::batch_reads)).
    #[cfg(feature = "testing")]
    pub(crate) fn get_data_together(&self, paths: &[&str]) -> Vec<Result<(Vec<u8>, Stat)>> {
        self.calls_together(
            paths,
            |core, path| {
                let path = self.server_path(path)?;
                let read = BatchRead::Data(GetDataRequest { path, watch: false });
                Shared::start_read_locked(core, read)
            },
            data_reply,
        )
    }

    /// Starts one call per item under one session lock, so that none is
    /// written before all are submitted, then writes them and waits for
    /// each reply, read with `reply`.
    #[cfg(feature = "testing")]
    fn calls_together<I: Copy, R>(
        &self,
        items: &[I],
        mut start: impl FnMut(&mut Core, I) -> Result<Arc<ReplySlot>>,
        reply: impl Fn(Response) -> Result<R>,
    ) -> Vec<Result<R>> {
        let slots: Vec<Result<_>> = {
            let mut core = self.shared().core();
            items.iter().map(|&item| start(&mut core, item)).collect()
        };
        self.shared().flush();
        slots
            .into_iter()
            .map(|slot| reply(self.shared().wait(&*slot?)?))
            .collect()
    }

    /// Like [`Client::get_data`], and leaves a one-shot data watch
    /// (NodeDataChanged or NodeDeleted).
    pub fn get_data_w(&self, path: &str) -> Result<(Vec<u8>, Stat, WatchReceiver)> {
        let (tx, rx) = self.watch_channel(path, &[WatchKind::Data])?;
        let (data, stat) = self.get_data_inner(path, Some(tx))?;
        Ok((data, stat, rx))
    }

    pub(crate) fn get_data_inner(
        &self,
        path: &str,
        watcher: Option<Watcher>,
    ) -> Result<(Vec<u8>, Stat)> {
        let path = self.server_path(path)?;
        let Some(watcher) = watcher else {
            let read = BatchRead::Data(GetDataRequest { path, watch: false });
            return data_reply(self.shared().call_read(read)?);
        };
        let request = GetDataRequest {
            path: path.clone(),
            watch: true,
        };
        let watch = Some(WatchRequest {
            kind: WatchKind::Data,
            path,
            watcher,
        });
        data_reply(self.shared().call(OpCode::GetData, &request, watch)?)
    }

    /// Sets the data of each `(path, data, version)`, with every setData
    /// submitted before any is written, as the calls of many callers at
    /// once may be: they share requests (see
    /// [`Config::batch_writes`](crate::Config::batch_writes)).
    #[cfg(feature = "testing")]
    pub(crate) fn set_data_together(
        &self,
        writes: &[(&str, &[u8], Option<i32>)],
    ) -> Vec<Result<Stat>> {
        self.calls_together(
            writes,
            |core, (path, data, version)| {
                let write = self.set_data_request(path, data, version)?;
                Shared::start_write_locked(core, write)
            },
            set_data_reply,
        )
    }

    /// Sets the node's data. `version` is the expected data version; `None` matches any.
    pub fn set_data(&self, path: &str, data: &[u8], version: Option<i32>) -> Result<Stat> {
        let request = self.set_data_request(path, data, version)?;
        set_data_reply(self.shared().call_write(request)?)
    }

    fn set_data_request(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
    ) -> Result<SetDataRequest> {
        Ok(SetDataRequest {
            path: self.server_path(path)?,
            data: Some(data.to_vec()),
            version: version.unwrap_or(-1),
        })
    }

    /// The names of the node's children, in no particular order.
    pub fn get_children(&self, path: &str) -> Result<Vec<String>> {
        self.get_children_inner(path, None)
    }

    /// Like [`Client::get_children`], and leaves a one-shot child watch
    /// (NodeChildrenChanged or NodeDeleted).
    pub fn get_children_w(&self, path: &str) -> Result<(Vec<String>, WatchReceiver)> {
        let (tx, rx) = self.watch_channel(path, &[WatchKind::Child])?;
        let children = self.get_children_inner(path, Some(tx))?;
        Ok((children, rx))
    }

    fn get_children_inner(&self, path: &str, watcher: Option<Watcher>) -> Result<Vec<String>> {
        let path = self.server_path(path)?;
        let Some(watcher) = watcher else {
            let read = BatchRead::Children(GetChildrenRequest { path, watch: false });
            return children_reply(self.shared().call_read(read)?);
        };
        let request = GetChildrenRequest {
            path: path.clone(),
            watch: true,
        };
        let watch = Some(WatchRequest {
            kind: WatchKind::Child,
            path,
            watcher,
        });
        children_reply(self.shared().call(OpCode::GetChildren, &request, watch)?)
    }

    /// The children's names and the node's Stat (`getChildren2`).
    pub fn get_children_with_stat(&self, path: &str) -> Result<(Vec<String>, Stat)> {
        let request = GetChildrenRequest {
            path: self.server_path(path)?,
            watch: false,
        };
        match self.shared().call(OpCode::GetChildren2, &request, None)? {
            Response::GetChildren2(r) => Ok((r.children, r.stat)),
            _ => Err(malformed("getChildren2 reply")),
        }
    }

    /// The node's ACL and Stat.
    pub fn get_acl(&self, path: &str) -> Result<(Vec<Acl>, Stat)> {
        let request = GetAclRequest {
            path: self.server_path(path)?,
        };
        match self.shared().call(OpCode::GetAcl, &request, None)? {
            Response::GetAcl(r) => Ok((r.acl, r.stat)),
            _ => Err(malformed("getACL reply")),
        }
    }

    /// Replaces the node's ACL. `version` is the expected ACL version
    /// (`aversion`); `None` matches any.
    pub fn set_acl(&self, path: &str, acl: &[Acl], version: Option<i32>) -> Result<Stat> {
        check_acl(acl)?;
        let request = SetAclRequest {
            path: self.server_path(path)?,
            acl: acl.to_vec(),
            version: version.unwrap_or(-1),
        };
        match self.shared().call(OpCode::SetAcl, &request, None)? {
            Response::SetAcl(r) => Ok(r.stat),
            _ => Err(malformed("setACL reply")),
        }
    }

    /// Waits until the server this client is connected to has caught up with
    /// the leader, so a following read sees every write committed before.
    pub fn sync(&self, path: &str) -> Result<()> {
        let request = PathRecord {
            path: self.server_path(path)?,
        };
        match self.shared().call(OpCode::Sync, &request, None)? {
            Response::Sync(_) => Ok(()),
            _ => Err(malformed("sync reply")),
        }
    }

    /// This session's ephemeral nodes whose paths start with `prefix` (a
    /// plain string prefix, so `/app/` matches only below `/app`, and `/ap`
    /// also matches `/apple`). Paths are returned relative to the chroot,
    /// and only those at or below it: the session's nodes outside it (made
    /// through a client without this chroot) are left out.
    pub fn get_ephemerals(&self, prefix: &str) -> Result<Vec<String>> {
        // A prefix may end in '/', like a sequential create's path.
        let trailing_slash = prefix.len() > 1 && prefix.ends_with('/');
        let request = PathRecord {
            path: self.server_path_for(prefix, trailing_slash)?,
        };
        match self.shared().call(OpCode::GetEphemerals, &request, None)? {
            // The server matches the chroot as a plain prefix too: under
            // `/app`, a session's `/apple` is no path of this client's.
            Response::GetEphemerals(r) => Ok(r
                .ephemerals
                .into_iter()
                .filter(|p| within_chroot(self.chroot(), p))
                .map(|p| self.client_path(p))
                .collect()),
            _ => Err(malformed("getEphemerals reply")),
        }
    }

    /// The number of descendants of `path` (all levels).
    pub fn get_all_children_number(&self, path: &str) -> Result<i32> {
        let request = PathRecord {
            path: self.server_path(path)?,
        };
        match self
            .shared()
            .call(OpCode::GetAllChildrenNumber, &request, None)?
        {
            Response::GetAllChildrenNumber(r) => Ok(r.total_number),
            _ => Err(malformed("getAllChildrenNumber reply")),
        }
    }

    /// Adds credentials to the session, re-sent after every reconnect:
    /// once however often the same ones were added (the handshake right
    /// after calls made while disconnected sends them once for each, so
    /// that each gets its reply).
    /// A failure ends the session with `AuthFailed`. A server that does not
    /// answer within the
    /// [`request_timeout`](crate::Config::request_timeout) (by default
    /// twice the session timeout) fails the call with `Timeout`, as any other
    /// call, and the credentials are still sent again after the reconnect.
    /// Made while disconnected, it waits for a handshake up to the session
    /// timeout, then fails with `ConnectionLoss`, as any other call; the
    /// credentials still go with the next handshake.
    pub fn add_auth(&self, scheme: &str, auth: &[u8]) -> Result<()> {
        if scheme.is_empty() {
            return Err(Error::InvalidArgument(
                "the auth scheme must not be empty".into(),
            ));
        }
        let packet = AuthPacket {
            auth_type: 0,
            scheme: scheme.to_owned(),
            auth: auth.to_vec(),
        };
        let slot = std::sync::Arc::new(super::core::ReplySlot::default());
        self.shared()
            .with_session(|s| s.add_auth(std::time::Instant::now(), packet, slot.clone()))?;
        self.shared().wait(&slot).map(drop)
    }

    /// The identities this session is authenticated as.
    pub fn who_am_i(&self) -> Result<Vec<ClientInfo>> {
        match self.shared().call(OpCode::WhoAmI, &(), None)? {
            Response::WhoAmI(r) => Ok(r.client_info),
            _ => Err(malformed("whoAmI reply")),
        }
    }

    /// Adds a persistent watch on `path` (which need not exist). Every
    /// matching event arrives on the receiver until
    /// [`Client::remove_watches`], the end of the session, or a node change
    /// that finds the receiver holding
    /// [`watch_buffer`](crate::Config::watch_buffer) events unread (see
    /// [`WatchReceiver::overflowed`](crate::WatchReceiver::overflowed)). Dropping the
    /// receiver removes the watch from the server too: at once, or, while
    /// another watch of this client on `path` shares the server's, once
    /// none does (see [`WatchReceiver`]).
    ///
    /// On 3.6–3.8 servers, a one-shot watch of this session on exactly
    /// `path` turns the server's persistent watch into a one-shot one, and
    /// removing one-shot watches there removes the persistent watch's half
    /// of that kind (ZOOKEEPER-4466 and 4471, fixed in 3.9): the receiver
    /// then hears less, or nothing, until a reconnect registers the watch
    /// again. Keep one-shot and persistent watches on different paths
    /// there.
    pub fn add_watch(&self, path: &str, mode: AddWatchMode) -> Result<WatchReceiver> {
        let kind = match mode {
            AddWatchMode::Persistent => WatchKind::Persistent,
            AddWatchMode::PersistentRecursive => WatchKind::PersistentRecursive,
        };
        let (tx, rx) = self.watch_channel(path, &[kind])?;
        let path = self.server_path(path)?;
        let request = AddWatchRequest {
            path: path.clone(),
            mode,
        };
        let watch = WatchRequest {
            kind,
            path,
            watcher: tx,
        };
        match self
            .shared()
            .call(OpCode::AddWatch, &request, Some(watch))?
        {
            // An error in the reply's body fails the call in the session.
            Response::AddWatch(_) => Ok(rx),
            _ => Err(malformed("addWatch reply")),
        }
    }

    /// Removes this session's watches of `watcher_type` on `path`, on the
    /// server and locally. Each removed watcher gets a last
    /// `DataWatchRemoved`, `ChildWatchRemoved` or `PersistentWatchRemoved`
    /// event, then its receiver disconnects. `NoWatcher` if there was none.
    pub fn remove_watches(&self, path: &str, watcher_type: WatcherType) -> Result<()> {
        let request = RemoveWatchesRequest {
            path: self.server_path(path)?,
            watcher_type,
        };
        // The local watchers go as the reply is handled (see
        // `Session::submit_remove_watches`), not once this caller wakes:
        // by then a later call's watch, which the server keeps, may be in.
        let slot = std::sync::Arc::new(super::core::ReplySlot::default());
        self.shared().with_session(|s| {
            s.submit_remove_watches(std::time::Instant::now(), &request, slot.clone())
        })?;
        self.shared().wait(&slot).map(drop)
    }
}

/// Refuses an empty ACL, which the server would refuse too.
pub(super) fn check_acl(acl: &[Acl]) -> Result<()> {
    if acl.is_empty() {
        return Err(Error::InvalidArgument("the ACL must not be empty".into()));
    }
    Ok(())
}

fn reject_ttl(mode: CreateMode) -> Result<()> {
    if mode.is_ttl() {
        return Err(Error::InvalidArgument(format!(
            "{mode:?} needs a TTL: use create_ttl"
        )));
    }
    Ok(())
}

/// A node's data and Stat from a getData reply.
fn data_reply(response: Response) -> Result<(Vec<u8>, Stat)> {
    match response {
        Response::GetData(r) => Ok((r.data.unwrap_or_default(), r.stat)),
        _ => Err(malformed("getData reply")),
    }
}

/// The new Stat from a setData reply.
fn set_data_reply(response: Response) -> Result<Stat> {
    match response {
        Response::SetData(r) => Ok(r.stat),
        _ => Err(malformed("setData reply")),
    }
}

/// The children's names from a getChildren reply.
fn children_reply(response: Response) -> Result<Vec<String>> {
    match response {
        Response::GetChildren(r) => Ok(r.children),
        _ => Err(malformed("getChildren reply")),
    }
}
