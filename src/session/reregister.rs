//! Re-registering watches after a reconnect.

use std::time::Instant;

use crate::error::Error;
use crate::proto::{OpCode, Response, SetWatches, SetWatches2, WatcherType};

use super::release::throttled_back_off;
use super::{Purpose, Queued, Session, WatchKind, WatchRegistry};

/// A re-registration sent and not yet confirmed: until it is, the watches
/// are set on the servers only as of `zxid`.
#[derive(Debug)]
pub(super) struct Unconfirmed {
    /// The relative zxid it was sent with.
    zxid: i64,
    /// How many of its records have not been answered with success yet.
    records: usize,
}

impl<T, W: Clone> Session<T, W> {
    /// After a handshake: sets every watch again, relative to the last
    /// zxid seen, or to an earlier one that a re-registration not yet
    /// confirmed was sent with (throttled, then cut off with its
    /// connection): the server fires at once the watches whose nodes
    /// changed since that zxid, so no change in between goes unheard.
    pub(super) fn set_watches_again(&mut self, now: Instant) {
        let zxid = self
            .rewatch
            .take()
            .map_or(self.last_zxid, |u| u.zxid.min(self.last_zxid));
        let mut records = 0;
        for record in set_watches(&self.watches, zxid, self.config.max_request) {
            // Only a path too long for any record of its own fails here.
            if let Some(request) = self.record_request(record, 0, now) {
                self.send_encoded(now, request);
                records += 1;
            }
        }
        if records > 0 {
            self.rewatch = Some(Unconfirmed { zxid, records });
        }
    }

    /// The server answered a re-registration record. One it throttled
    /// (refused unapplied, on a connection that stays up) goes again after
    /// a back-off: without it, every watch it names would stay unset on the
    /// server while the client waits for its events (a lock's waiter, for
    /// its predecessor's deletion, for ever). A request made meanwhile
    /// sends it ahead of itself, its back-off cut short (see
    /// [`Session::send_delayed_set_watches`]). Either way, it goes without
    /// the watches forgotten meanwhile (see [`Session::still_wanted`]).
    pub(super) fn set_watches_answered(
        &mut self,
        record: SetWatches2,
        throttled: u32,
        result: crate::Result<Response>,
    ) {
        match result {
            Ok(_) => {
                self.record_confirmed();
                // Only a whole re-registration set counts: one record taken
                // while another is refused is no end to the refusals.
                if self.rewatch.is_none() {
                    self.rewatch_refusals = 0;
                }
            }
            // A server that does not know setWatches2 (3.5) refuses it, and
            // closes the connection: the persistent and recursive watches
            // can be set on no such server, and asked again on every
            // connection, they would be refused on every one, for ever.
            // They end, each told as a removal; the one-shot watches go on,
            // set again by the next handshake in a plain setWatches.
            Err(Error::Unimplemented) if is_v2(&record) => {
                let ended =
                    record.persistent_watches.len() + record.persistent_recursive_watches.len();
                log::warn!(
                    "the server does not take persistent watches (setWatches2 refused): \
                     {ended} persistent watch(es) ended"
                );
                let one_shot = !(record.data_watches.is_empty()
                    && record.exist_watches.is_empty()
                    && record.child_watches.is_empty());
                for path in record.persistent_watches {
                    self.remove_local_watchers(path, WatcherType::Persistent);
                }
                for path in record.persistent_recursive_watches {
                    self.remove_local_watchers(path, WatcherType::PersistentRecursive);
                }
                if one_shot {
                    self.request_disconnect(Error::Unimplemented);
                } else {
                    self.record_confirmed();
                }
            }
            // Not after closeSession, which the server answers last.
            Err(Error::ThrottledOp) if self.background_can_go() => {
                let times = throttled.saturating_add(1);
                let due = self.last_recv + throttled_back_off(times);
                log::debug!("re-registration of watches throttled; again after a back-off");
                match self.record_request(record, times, due) {
                    Some(request) => self.insert_delayed(due, request),
                    None => self.record_confirmed(),
                }
            }
            // Left unset, its watches' events would never come: a new
            // connection sets them again, maybe on a server that takes
            // them. Servers that all refuse them (persistent watches on an
            // ensemble downgraded to 3.5, say) are not reconnected to for
            // ever: the watches are then left unset.
            Err(e) if self.background_can_go() && self.rewatch_refusals < MAX_REWATCH_REFUSALS => {
                self.rewatch_refusals += 1;
                log::warn!("re-registering watches failed: {e}; reconnecting");
                self.request_disconnect(e);
            }
            Err(e) => log::warn!("re-registering watches failed: {e}; their events may not come"),
        }
    }

    /// A throttled re-registration record, due to go again, without the
    /// watches whose watchers were all forgotten since it was made: set
    /// again, a dropped persistent watch would stay on the server, unheard,
    /// its removal (sent meanwhile, and answered `NoWatcher`) undone. `None`
    /// if none is left, which counts as confirmed.
    pub(super) fn still_wanted(&mut self, request: Queued<T, W>) -> Option<Queued<T, W>> {
        let Purpose::SetWatches { record, throttled } = &request.purpose else {
            return Some(request);
        };
        let mut kept = record.clone();
        for kind in WatchKind::ALL {
            list(&mut kept, kind).retain(|path| self.watches.any_where(kind, path, |_| true));
        }
        if kept == *record {
            return Some(request);
        }
        let (throttled, deadline) = (*throttled, request.deadline);
        if WatchKind::ALL
            .into_iter()
            .all(|kind| list(&mut kept, kind).is_empty())
        {
            self.record_confirmed();
            return None;
        }
        let request = self.record_request(kept, throttled, deadline);
        if request.is_none() {
            self.record_confirmed();
        }
        request
    }

    /// One more record of the re-registration under way needs no answer.
    fn record_confirmed(&mut self) {
        if let Some(unconfirmed) = &mut self.rewatch {
            unconfirmed.records = unconfirmed.records.saturating_sub(1);
            if unconfirmed.records == 0 {
                self.rewatch = None;
            }
        }
    }

    /// `record`, encoded (with a placeholder xid) as a request that keeps
    /// it to be sent again; throttled `throttled` times in a row so far.
    /// `None`, with a warning, if it cannot be encoded (a record of one
    /// path too long for any; a part of a record that was encoded is not).
    fn record_request(
        &self,
        record: SetWatches2,
        throttled: u32,
        deadline: Instant,
    ) -> Option<Queued<T, W>> {
        let (op, encoded) = finish(record.clone());
        let frame = match &encoded {
            SetWatchesRecord::V1(r) => self.encode_unsent(op, r),
            SetWatchesRecord::V2(r) => self.encode_unsent(op, r),
        };
        match frame {
            Ok(frame) => Some(Queued {
                op,
                max_results: usize::MAX,
                frame,
                purpose: Purpose::SetWatches { record, throttled },
                deadline,
            }),
            Err(e) => {
                log::warn!("watches not re-registered: {e}");
                None
            }
        }
    }
}

/// How many re-registrations in a row may be refused (other than
/// throttled), each dropping its connection, before their watches are left
/// unset.
const MAX_REWATCH_REFUSALS: u32 = 3;

/// Each record stops growing once its paths hold this many bytes, which keeps
/// it far below the server's 1 MiB request limit (the Java client's rule).
pub(crate) const MAX_PATH_BYTES_PER_RECORD: usize = 128 * 1024;

/// What a record's frame holds besides its paths: the request header (8
/// bytes), the relative zxid (8) and five vector lengths (4 each).
const RECORD_OVERHEAD: usize = 8 + 8 + 5 * 4;

/// Refuses a watch on `path` that no re-registration record could carry
/// within `max_request` bytes: set, it would be lost at the first
/// reconnect, its watcher never told.
pub(crate) fn check_fits(path: &str, max_request: usize) -> crate::Result<()> {
    let frame = RECORD_OVERHEAD + 4 + path.len();
    if frame > max_request {
        return Err(crate::Error::InvalidArgument(format!(
            "a watch on a path of {} bytes could not be set again after a reconnect: \
             its record would take {frame} bytes, over the server's {max_request}-byte \
             limit (jute.maxbuffer)",
            path.len()
        )));
    }
    Ok(())
}

/// One re-registration record: `setWatches` when it holds only one-shot
/// watches (understood by 3.5 servers too), `setWatches2` otherwise.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SetWatchesRecord {
    V1(SetWatches),
    V2(SetWatches2),
}

/// The records that re-register every watch in `registry`, relative to
/// `relative_zxid`, so that changes missed while disconnected fire at once.
/// Each fits in `max_request` bytes (the frame's payload), as every request
/// must, or the session would refuse to send it.
pub(crate) fn set_watches<W: Clone>(
    registry: &WatchRegistry<W>,
    relative_zxid: i64,
    max_request: usize,
) -> Vec<SetWatches2> {
    let mut out = Vec::new();
    let mut current = empty(relative_zxid);
    let (mut bytes, mut paths) = (0, 0);
    // The frame's size so far.
    let mut frame = RECORD_OVERHEAD;
    for kind in WatchKind::ALL {
        for path in registry.paths(kind) {
            let size = 4 + path.len();
            if paths > 0 && frame + size > max_request {
                out.push(std::mem::replace(&mut current, empty(relative_zxid)));
                (bytes, paths, frame) = (0, 0, RECORD_OVERHEAD);
            }
            frame += size;
            bytes += path.len();
            paths += 1;
            list(&mut current, kind).push(path);
            if bytes >= MAX_PATH_BYTES_PER_RECORD {
                out.push(std::mem::replace(&mut current, empty(relative_zxid)));
                (bytes, paths, frame) = (0, 0, RECORD_OVERHEAD);
            }
        }
    }
    if paths > 0 {
        out.push(current);
    }
    out
}

fn empty(relative_zxid: i64) -> SetWatches2 {
    SetWatches2 {
        relative_zxid,
        data_watches: Vec::new(),
        exist_watches: Vec::new(),
        child_watches: Vec::new(),
        persistent_watches: Vec::new(),
        persistent_recursive_watches: Vec::new(),
    }
}

fn list(record: &mut SetWatches2, kind: WatchKind) -> &mut Vec<String> {
    match kind {
        WatchKind::Data => &mut record.data_watches,
        WatchKind::Exist => &mut record.exist_watches,
        WatchKind::Child => &mut record.child_watches,
        WatchKind::Persistent => &mut record.persistent_watches,
        WatchKind::PersistentRecursive => &mut record.persistent_recursive_watches,
    }
}

/// Whether `record` needs `setWatches2`: it holds a persistent or
/// recursive watch.
fn is_v2(record: &SetWatches2) -> bool {
    !(record.persistent_watches.is_empty() && record.persistent_recursive_watches.is_empty())
}

fn finish(record: SetWatches2) -> (OpCode, SetWatchesRecord) {
    if !is_v2(&record) {
        let v1 = SetWatches {
            relative_zxid: record.relative_zxid,
            data_watches: record.data_watches,
            exist_watches: record.exist_watches,
            child_watches: record.child_watches,
        };
        (OpCode::SetWatches, SetWatchesRecord::V1(v1))
    } else {
        (OpCode::SetWatches2, SetWatchesRecord::V2(record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_into_records_under_the_size_limit() {
        let mut registry = WatchRegistry::new();
        let long = "x".repeat(1000);
        for i in 0..300 {
            registry.add(WatchKind::Data, format!("/{long}/{i}"), ());
        }
        let records = set_watches(&registry, 42, crate::proto::JUTE_MAX_BUFFER);
        assert_eq!(records.len(), 3);
        let mut total = 0;
        for (op, record) in records.into_iter().map(finish) {
            assert_eq!(op, OpCode::SetWatches);
            let SetWatchesRecord::V1(r) = record else {
                panic!("expected setWatches")
            };
            assert_eq!(r.relative_zxid, 42);
            let bytes: usize = r.data_watches.iter().map(String::len).sum();
            assert!(bytes < MAX_PATH_BYTES_PER_RECORD + 1010);
            total += r.data_watches.len();
        }
        assert_eq!(total, 300);
    }

    #[test]
    fn persistent_watches_need_set_watches2() {
        let mut registry = WatchRegistry::new();
        registry.add(WatchKind::PersistentRecursive, "/a".into(), ());
        registry.add(WatchKind::Child, "/b".into(), ());
        let records = set_watches(&registry, 7, crate::proto::JUTE_MAX_BUFFER);
        assert_eq!(records.len(), 1);
        let (op, SetWatchesRecord::V2(r)) = finish(records[0].clone()) else {
            panic!("expected setWatches2")
        };
        assert_eq!(op, OpCode::SetWatches2);
        assert_eq!(r.persistent_recursive_watches, ["/a"]);
        assert_eq!(r.child_watches, ["/b"]);
        assert!(set_watches(&WatchRegistry::<()>::new(), 0, 1024).is_empty());
    }
}
