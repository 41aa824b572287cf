//! Isolated operators ([`AotOpBuilder::isolated`](super::operator::AotOpBuilder::isolated),
//! `TRITIUM_AOT_ISOLATE=1`): `FuncInit` and `Func` run in a worker process
//! (`shim/worker.cc`, built once into the cache), so a segfault, an abort, an `exit` or a
//! call past its timeout is an [`AotError::Worker`] naming the operator and the signal, and
//! the next call starts a fresh worker (re-running `FuncInit` there).
//!
//! Protocol, one request at a time: `[u32 op][u64 length][payload]` on the worker's stdin;
//! `[u64 length][u32 status][i32 return value][str message][u64 n][u64 workspace × n]` on its
//! stdout (the worker moves user code's stdout to stderr). Tensors live in a file mapping
//! both processes share (`/dev/shm` where it exists): requests carry byte offsets into it,
//! never addresses. Strings are `[u64 length][bytes]`; integers little-endian.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::attrs::{AttrKind, AttrValue, Attrs};
use super::dtype::{DType, MindSporeDType};
use super::error::{AotError, AotResult};
use super::reply_pipe::{NoReply, ReplyPipe};

/// How an isolated operator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Isolation {
    /// A call (or `FuncInit`) still running after this long is killed with its worker.
    pub timeout: Duration,
}

impl Default for Isolation {
    fn default() -> Self {
        Isolation {
            timeout: Duration::from_secs(60),
        }
    }
}

impl Isolation {
    /// `Some(default)` when `TRITIUM_AOT_ISOLATE=1`.
    pub(crate) fn from_env() -> Option<Isolation> {
        matches!(
            std::env::var("TRITIUM_AOT_ISOLATE").as_deref(),
            Ok("1") | Ok("true") | Ok("on")
        )
        .then(Isolation::default)
    }
}

const OP_MAP: u32 = 1;
const OP_INIT: u32 = 2;
const OP_CALL: u32 = 3;
const OP_FREE: u32 = 4;

/// Worker generations and instance ids, unique in the process.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A request's payload.
#[derive(Default)]
pub(crate) struct Payload(Vec<u8>);

impl Payload {
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend(v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &[u8]) -> &mut Self {
        self.u64(s.len() as u64);
        self.0.extend(s);
        self
    }

    /// `[u64 n]` then per tensor `[u64 rank][i64 dims…][str dtype]`.
    pub(crate) fn shapes(&mut self, shapes: &[Vec<i64>], dtypes: &[DType]) -> &mut Self {
        self.u64(shapes.len() as u64);
        for (s, d) in shapes.iter().zip(dtypes) {
            self.u64(s.len() as u64);
            for &x in s {
                self.0.extend(x.to_le_bytes());
            }
            self.str(d.ms_cname().to_bytes());
        }
        self
    }

    /// Every attribute as the kernel may read it: for each name and each kind, the value
    /// [`Attrs::get_as`] gives or its error, so the worker answers exactly as this process
    /// would; then the message for a name that is not set.
    fn attrs(&mut self, attrs: &Attrs) -> &mut Self {
        let missing = match attrs.get_as("\0", AttrKind::Bool) {
            Err(AotError::Attr { message, .. }) => message,
            _ => "not set".to_string(),
        };
        self.str(missing.as_bytes());
        let kinds = (0..8).filter_map(AttrKind::from_i32);
        let names: Vec<&str> = attrs.iter().map(|(n, _)| n).collect();
        self.u64((names.len() * kinds.clone().count()) as u64);
        for name in names {
            for kind in kinds.clone() {
                self.str(name.as_bytes()).i32(kind as i32);
                match attrs.get_as(name, kind) {
                    Err(e) => {
                        self.i32(0).str(e.to_string().as_bytes());
                    }
                    Ok(v) => {
                        self.i32(1);
                        self.value(&v);
                    }
                }
            }
        }
        self
    }

    /// `[i32 kind][i32 b][i64 i][f32 f][str][u64 bytes][data][u64 elements][u64 rows][u64…]`.
    fn value(&mut self, v: &AttrValue) {
        let (mut b, mut i, mut f, mut s) = (0i32, 0i64, 0f32, &[][..]);
        let (mut data, mut rows, mut elements) = (Vec::new(), Vec::new(), 0usize);
        let ints = |x: &[i64], data: &mut Vec<u8>| {
            data.extend(x.iter().flat_map(|v| v.to_le_bytes()));
            x.len()
        };
        let floats = |x: &[f32], data: &mut Vec<u8>| {
            data.extend(x.iter().flat_map(|v| v.to_le_bytes()));
            x.len()
        };
        match v {
            AttrValue::Bool(x) => b = i32::from(*x),
            AttrValue::Int(x) => i = *x,
            AttrValue::Float(x) => f = *x,
            AttrValue::Str(x) => s = x.as_bytes(),
            AttrValue::IntVec(x) => elements = ints(x, &mut data),
            AttrValue::FloatVec(x) => elements = floats(x, &mut data),
            AttrValue::Int2D(x) => {
                for r in x {
                    rows.push(r.len() as u64);
                    elements += ints(r, &mut data);
                }
            }
            AttrValue::Float2D(x) => {
                for r in x {
                    rows.push(r.len() as u64);
                    elements += floats(r, &mut data);
                }
            }
        }
        self.i32(v.kind() as i32).i32(b);
        self.0.extend(i.to_le_bytes());
        self.0.extend(f.to_le_bytes());
        self.str(s);
        self.str(&data);
        self.u64(elements as u64).u64(rows.len() as u64);
        for r in rows {
            self.u64(r);
        }
    }
}

/// A worker's answer to one request.
pub(crate) struct Reply {
    /// 0 done, 1 the worker could not do it, 2 the user function threw.
    pub status: u32,
    /// The user function's return value.
    pub ret: i32,
    /// What failed.
    pub message: String,
    /// Workspace sizes (`SetWorkSpace` in `FuncInit`).
    pub workspaces: Vec<usize>,
}

fn parse_reply(b: &[u8]) -> Option<Reply> {
    let u64_at = |at: usize| Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?));
    let status = u32::from_le_bytes(b.get(0..4)?.try_into().ok()?);
    let ret = i32::from_le_bytes(b.get(4..8)?.try_into().ok()?);
    let mlen = usize::try_from(u64_at(8)?).ok()?;
    let message = String::from_utf8_lossy(b.get(16..16usize.checked_add(mlen)?)?).into_owned();
    let at = 16 + mlen;
    let n = usize::try_from(u64_at(at)?).ok()?;
    let workspaces = (0..n.min(1 << 16))
        .map(|k| u64_at(at + 8 + 8 * k).map(|v| v as usize))
        .collect::<Option<Vec<_>>>()?;
    Some(Reply {
        status,
        ret,
        message,
        workspaces,
    })
}

/// A shared file mapping the worker maps too.
struct Arena {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Arena {
    fn drop(&mut self) {
        // SAFETY: `ptr` is a live mapping of `len` bytes made by `Arena::new`.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

impl Arena {
    /// A zeroed mapping of `len` bytes in a new file (returned for the worker to map; the
    /// caller unlinks it once mapped).
    fn new(len: usize) -> std::io::Result<(Arena, PathBuf)> {
        use std::os::fd::AsRawFd;
        let dir = ["/dev/shm"]
            .iter()
            .map(PathBuf::from)
            .find(|d| d.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        let n = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("tritium-aot-{}-{n}", std::process::id()));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        let made = file.set_len(len as u64).and_then(|()| {
            // SAFETY: maps `len` bytes of a file we just sized; checked for MAP_FAILED.
            let p = unsafe {
                libc::mmap(
                    std::ptr::null_mut(),
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_SHARED,
                    file.as_raw_fd(),
                    0,
                )
            };
            if p == libc::MAP_FAILED {
                return Err(std::io::Error::last_os_error());
            }
            Ok(Arena { ptr: p.cast(), len })
        });
        match made {
            Ok(a) => Ok((a, path)),
            Err(e) => {
                let _ = std::fs::remove_file(&path);
                Err(e)
            }
        }
    }

    /// The mapping's bytes.
    fn bytes(&mut self) -> &mut [u8] {
        // SAFETY: a live, exclusively owned mapping of `len` bytes (the worker touches it only
        // while a request is in flight, when this process waits).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// One running worker process.
pub(crate) struct Worker {
    child: Child,
    requests: ChildStdin,
    replies: ReplyPipe,
    /// Unique per worker: instances initialized in another generation are re-initialized.
    pub generation: u64,
    arena: Option<Arena>,
}

// SAFETY: the arena pointer is only used behind the operator's worker lock.
unsafe impl Send for Worker {}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Worker {
    /// Starts `executable`.
    pub fn spawn(executable: &PathBuf, function: &str) -> AotResult<Worker> {
        let mut child = Command::new(executable)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| AotError::Worker {
                function: function.to_string(),
                message: format!(
                    "cannot start the isolation worker {}: {e}",
                    executable.display()
                ),
            })?;
        let requests = child.stdin.take().expect("piped");
        let out = child.stdout.take().expect("piped");
        let replies = ReplyPipe::new(out).map_err(|e| AotError::Worker {
            function: function.to_string(),
            message: format!("cannot read the isolation worker's replies: {e}"),
        })?;
        Ok(Worker {
            child,
            requests,
            replies,
            generation: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            arena: None,
        })
    }

    /// Sends a request and waits for its reply. A worker that dies or runs past `timeout`
    /// is an error naming `function` and what happened (the caller drops the worker).
    pub fn request(
        &mut self,
        op: u32,
        payload: &Payload,
        function: &str,
        timeout: Duration,
    ) -> AotResult<Reply> {
        let mut msg = Vec::with_capacity(12 + payload.0.len());
        msg.extend(op.to_le_bytes());
        msg.extend((payload.0.len() as u64).to_le_bytes());
        msg.extend(&payload.0);
        let sent = self
            .requests
            .write_all(&msg)
            .and_then(|()| self.requests.flush());
        let died = |w: &mut Worker| AotError::Worker {
            function: function.to_string(),
            message: w.death(),
        };
        if sent.is_err() {
            return Err(died(self));
        }
        match self.replies.next(timeout) {
            Ok(body) => parse_reply(&body).ok_or_else(|| AotError::Worker {
                function: function.to_string(),
                message: "the isolation worker sent a malformed reply".to_string(),
            }),
            Err(NoReply::Closed) => Err(died(self)),
            Err(NoReply::TimedOut) => {
                let _ = self.child.kill();
                let _ = self.child.wait();
                Err(AotError::Worker {
                    function: function.to_string(),
                    message: format!(
                        "still running after the {:.1} s timeout: the isolation worker was killed",
                        timeout.as_secs_f64()
                    ),
                })
            }
        }
    }

    /// How the worker ended, once its replies stopped.
    fn death(&mut self) -> String {
        use std::os::unix::process::ExitStatusExt;
        let status = match self.child.wait() {
            Ok(s) => s,
            Err(e) => return format!("the isolation worker was lost ({e})"),
        };
        match (status.signal(), status.code()) {
            (Some(sig), _) => format!(
                "crashed the isolation worker with signal {sig} ({})",
                signal_name(sig)
            ),
            (None, Some(code)) => format!("ended the isolation worker with exit status {code}"),
            _ => format!("ended the isolation worker ({status})"),
        }
    }

    /// The first `len` bytes of the shared mapping (a larger one is mapped by the worker
    /// first), as the last call left them.
    pub fn arena(&mut self, len: usize, function: &str, timeout: Duration) -> AotResult<&mut [u8]> {
        let len = len.max(1);
        let fits = self.arena.as_ref().is_some_and(|a| a.len >= len);
        if !fits {
            let grown = len.max(self.arena.as_ref().map_or(0, |a| a.len * 2));
            let (arena, path) = Arena::new(grown).map_err(|e| AotError::Worker {
                function: function.to_string(),
                message: format!("cannot create {grown} bytes of shared memory: {e}"),
            })?;
            let reply = self.request(
                OP_MAP,
                Payload::default().str(path.as_os_str().as_encoded_bytes()),
                function,
                timeout,
            );
            let _ = std::fs::remove_file(&path);
            let reply = reply?;
            if reply.status != 0 {
                return Err(AotError::Worker {
                    function: function.to_string(),
                    message: reply.message,
                });
            }
            self.arena = Some(arena);
        }
        let bytes = self.arena.as_mut().expect("mapped").bytes();
        Ok(&mut bytes[..len])
    }

    /// The shared mapping as the last call left it (after [`Worker::arena`]).
    pub fn mapped(&mut self) -> &[u8] {
        match self.arena.as_mut() {
            Some(a) => a.bytes(),
            None => &[],
        }
    }

    /// `FuncInit` of a new instance `id` (with no init function, only its `AotExtra`).
    #[allow(clippy::too_many_arguments)]
    pub fn init(
        &mut self,
        id: u64,
        library: &std::path::Path,
        symbol: &str,
        init: Option<&str>,
        attrs: &Attrs,
        shapes: &[Vec<i64>],
        dtypes: &[DType],
        timeout: Duration,
    ) -> AotResult<Reply> {
        let mut p = Payload::default();
        p.u64(id)
            .str(library.as_os_str().as_encoded_bytes())
            .str(symbol.as_bytes())
            .str(init.unwrap_or("").as_bytes())
            .attrs(attrs)
            .shapes(shapes, dtypes);
        let function = init.unwrap_or(symbol);
        self.request(OP_INIT, &p, function, timeout)
    }

    /// `Func` of instance `id` with its parameters at `offsets` of the arena.
    pub fn call(
        &mut self,
        id: u64,
        symbol: &str,
        offsets: &[usize],
        shapes: &[Vec<i64>],
        dtypes: &[DType],
        timeout: Duration,
    ) -> AotResult<Reply> {
        let mut p = Payload::default();
        p.u64(id).u64(offsets.len() as u64);
        for &o in offsets {
            p.u64(o as u64);
        }
        p.shapes(shapes, dtypes);
        self.request(OP_CALL, &p, symbol, timeout)
    }

    /// Destroys instance `id`'s kernel data in the worker.
    pub fn free(&mut self, id: u64, symbol: &str, timeout: Duration) -> AotResult<Reply> {
        self.request(OP_FREE, Payload::default().u64(id), symbol, timeout)
    }
}

/// A fresh instance id.
pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGSEGV => "SIGSEGV, a segmentation fault",
        libc::SIGABRT => "SIGABRT, an abort",
        libc::SIGBUS => "SIGBUS, a bus error",
        libc::SIGFPE => "SIGFPE, an arithmetic fault",
        libc::SIGILL => "SIGILL, an illegal instruction",
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    }
}
