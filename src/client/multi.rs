//! `multi` (atomic writes) and `multiRead` (independent reads).

use super::Client;
use crate::error::{malformed, Error, Result};
use crate::proto::{
    Acl, CheckVersionRequest, CreateMode, DeleteRequest, GetChildrenRequest, GetDataRequest,
    MultiOp, MultiRequest, MultiResponse, OpCode, OpResult, Response, SetDataRequest, Stat,
};

/// One write in a [`Client::multi`] transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Op {
    /// Create a node (any non-TTL mode).
    Create {
        /// The path (a prefix for sequential modes).
        path: String,
        /// The initial data.
        data: Vec<u8>,
        /// The ACL (must not be empty).
        acl: Vec<Acl>,
        /// The mode.
        mode: CreateMode,
    },
    /// Delete a node.
    Delete {
        /// The path.
        path: String,
        /// The expected data version; `None` matches any.
        version: Option<i32>,
    },
    /// Set a node's data.
    SetData {
        /// The path.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The expected data version; `None` matches any.
        version: Option<i32>,
    },
    /// Require a node to be at a data version.
    Check {
        /// The path.
        path: String,
        /// The required data version; `None` matches any, so that the check
        /// only requires the node to exist.
        version: Option<i32>,
    },
}

impl Op {
    /// A create op.
    pub fn create(
        path: impl Into<String>,
        data: impl Into<Vec<u8>>,
        acl: Vec<Acl>,
        mode: CreateMode,
    ) -> Op {
        Op::Create {
            path: path.into(),
            data: data.into(),
            acl,
            mode,
        }
    }

    /// A delete op.
    pub fn delete(path: impl Into<String>, version: Option<i32>) -> Op {
        Op::Delete {
            path: path.into(),
            version,
        }
    }

    /// A set-data op.
    pub fn set_data(path: impl Into<String>, data: impl Into<Vec<u8>>, version: Option<i32>) -> Op {
        Op::SetData {
            path: path.into(),
            data: data.into(),
            version,
        }
    }

    /// A version check (`None` for any version: the node must exist).
    pub fn check(path: impl Into<String>, version: Option<i32>) -> Op {
        Op::Check {
            path: path.into(),
            version,
        }
    }
}

/// The result of one op of a successful [`Client::multi`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpOutcome {
    /// A node was created; the Stat is present for containers.
    Created {
        /// The created path, relative to the chroot.
        path: String,
        /// The new node's Stat, when the server returned one.
        stat: Option<Stat>,
    },
    /// A node was deleted.
    Deleted,
    /// Data was set.
    DataSet(Stat),
    /// A check passed.
    Checked,
}

/// One read in a [`Client::multi_read`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReadOp {
    /// Read a node's data.
    GetData(String),
    /// List a node's children.
    GetChildren(String),
}

/// The result of one read of [`Client::multi_read`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReadOutcome {
    /// The data and Stat.
    Data(Vec<u8>, Stat),
    /// The children's names.
    Children(Vec<String>),
}

impl Client {
    /// Sends a multi or multiRead and checks that the reply has one result
    /// per op. With `session`, it is sent only in that session (see
    /// [`Shared::call_in_session`](super::core::Shared::call_in_session)).
    fn call_multi(
        &self,
        op: OpCode,
        request: &MultiRequest,
        session: Option<u64>,
    ) -> Result<MultiResponse> {
        let reply = self.shared().call_in_session(session, op, request)?;
        let Response::Multi(response) = reply else {
            return Err(malformed("multi reply of another kind"));
        };
        if response.results.len() != request.ops.len() {
            return Err(malformed(
                "multi reply with a result count unlike the request's",
            ));
        }
        Ok(response)
    }

    /// Applies all `ops` atomically, or none of them. On failure the error is
    /// [`Error::MultiFailed`] with the index and error of the first op that
    /// failed. An empty list succeeds without a round trip.
    pub fn multi(&self, ops: &[Op]) -> Result<Vec<OpOutcome>> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        self.multi_of(ops.iter(), None)
    }

    /// Applies `ops` (at least one) as one transaction; see [`Self::multi`].
    /// With `session`, only in that session (see
    /// [`Session::generation`](crate::session::Session::generation)): once
    /// a new one has replaced it, `SessionExpired` and nothing sent.
    pub(crate) fn multi_of<'o>(
        &self,
        ops: impl Iterator<Item = &'o Op>,
        session: Option<u64>,
    ) -> Result<Vec<OpOutcome>> {
        let mut request = MultiRequest {
            ops: Vec::with_capacity(ops.size_hint().0),
        };
        for op in ops {
            request.ops.push(match op {
                Op::Create {
                    path,
                    data,
                    acl,
                    mode,
                } => {
                    if mode.is_ttl() {
                        return Err(Error::InvalidArgument(
                            "TTL creates are not supported in multi".into(),
                        ));
                    }
                    let create = self.create_request(path, data, acl, *mode)?;
                    if mode.is_container() {
                        MultiOp::CreateContainer(create)
                    } else {
                        MultiOp::Create(create)
                    }
                }
                Op::Delete { path, version } => MultiOp::Delete(DeleteRequest {
                    path: self.delete_path(path)?,
                    version: version.unwrap_or(-1),
                }),
                Op::SetData {
                    path,
                    data,
                    version,
                } => MultiOp::SetData(SetDataRequest {
                    path: self.server_path(path)?,
                    data: Some(data.clone()),
                    version: version.unwrap_or(-1),
                }),
                Op::Check { path, version } => MultiOp::Check(CheckVersionRequest {
                    path: self.server_path(path)?,
                    version: version.unwrap_or(-1),
                }),
            });
        }
        let response = self.call_multi(OpCode::Multi, &request, session)?;
        if let Some((index, code)) = response.failing_op()? {
            return Err(Error::MultiFailed {
                index,
                error: Box::new(Error::from_code(code)),
            });
        }
        response
            .results
            .into_iter()
            .zip(&request.ops)
            .map(|(result, op)| match (op, result) {
                (MultiOp::Create(_) | MultiOp::CreateContainer(_), OpResult::Create(r)) => {
                    Ok(OpOutcome::Created {
                        path: self.client_path(r.path),
                        stat: None,
                    })
                }
                (MultiOp::Create(_) | MultiOp::CreateContainer(_), OpResult::Create2(r)) => {
                    Ok(OpOutcome::Created {
                        path: self.client_path(r.path),
                        stat: Some(r.stat),
                    })
                }
                (MultiOp::Delete(_), OpResult::Delete) => Ok(OpOutcome::Deleted),
                (MultiOp::SetData(_), OpResult::SetData(r)) => Ok(OpOutcome::DataSet(r.stat)),
                (MultiOp::Check(_), OpResult::Check) => Ok(OpOutcome::Checked),
                _ => Err(malformed("multi result unlike its op")),
            })
            .collect()
    }

    /// Runs reads together in one round trip; each succeeds or fails on its
    /// own. Needs a 3.6+ server. No watches are left.
    pub fn multi_read(&self, ops: &[ReadOp]) -> Result<Vec<Result<ReadOutcome>>> {
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let mut request = MultiRequest {
            ops: Vec::with_capacity(ops.len()),
        };
        for op in ops {
            request.ops.push(match op {
                ReadOp::GetData(path) => MultiOp::GetData(GetDataRequest {
                    path: self.server_path(path)?,
                    watch: false,
                }),
                ReadOp::GetChildren(path) => MultiOp::GetChildren(GetChildrenRequest {
                    path: self.server_path(path)?,
                    watch: false,
                }),
            });
        }
        let response = self.call_multi(OpCode::MultiRead, &request, None)?;
        response
            .results
            .into_iter()
            .zip(&request.ops)
            .map(|(result, op)| match (op, result) {
                (MultiOp::GetData(_), OpResult::GetData(r)) => {
                    Ok(Ok(ReadOutcome::Data(r.data.unwrap_or_default(), r.stat)))
                }
                (MultiOp::GetChildren(_), OpResult::GetChildren(r)) => {
                    Ok(Ok(ReadOutcome::Children(r.children)))
                }
                (_, OpResult::Error(e)) if e.err != 0 => Ok(Err(Error::from_code(e.err))),
                _ => Err(malformed("multiRead result unlike its read")),
            })
            .collect()
    }
}
