//! The isolation worker's reply pipe, read on the calling thread: it spins for a short while
//! (a small call's reply arrives within microseconds, and sleeping in `poll` costs a
//! scheduler wake-up that took 20–30 µs on an idle VM), then sleeps in `poll` until the
//! reply, the worker's death or the timeout.

use std::io::Read;
use std::os::fd::AsRawFd;
use std::process::ChildStdout;
use std::time::{Duration, Instant};

/// How long a wait spins before it sleeps.
pub(crate) const SPIN: Duration = Duration::from_micros(200);

/// Replies longer than this are malformed (a real one is a few hundred bytes).
const MAX_REPLY: usize = 1 << 24;

/// Why no reply came.
pub(crate) enum NoReply {
    /// The pipe closed or failed: the worker is gone.
    Closed,
    /// The timeout passed first.
    TimedOut,
}

/// `[u64 length][body]` frames from a non-blocking pipe.
pub(crate) struct ReplyPipe {
    out: ChildStdout,
    pending: Vec<u8>,
}

impl ReplyPipe {
    /// Makes `out` non-blocking.
    pub fn new(out: ChildStdout) -> std::io::Result<ReplyPipe> {
        let fd = out.as_raw_fd();
        // SAFETY: fcntl on a descriptor we own; both results are checked.
        let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(ReplyPipe {
            out,
            pending: Vec::new(),
        })
    }

    /// The next reply's body (empty when its length is impossible, which the caller reads
    /// as malformed).
    pub fn next(&mut self, timeout: Duration) -> Result<Vec<u8>, NoReply> {
        let start = Instant::now();
        let mut chunk = [0u8; 4096];
        loop {
            if let Some(body) = self.frame() {
                return Ok(body);
            }
            match self.out.read(&mut chunk) {
                Ok(0) => return Err(NoReply::Closed),
                Ok(n) => {
                    self.pending.extend_from_slice(&chunk[..n]);
                    continue;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => return Err(NoReply::Closed),
            }
            let waited = start.elapsed();
            if waited >= timeout {
                return Err(NoReply::TimedOut);
            }
            if waited < SPIN {
                // Yield rather than burn the core the worker may need.
                std::thread::yield_now();
                continue;
            }
            let left = timeout - waited;
            let ms = left.as_millis().clamp(1, i32::MAX as u128) as i32;
            let mut fd = libc::pollfd {
                fd: self.out.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; readiness, hang-up and errors are all read by the
            // `read` at the top of the loop.
            unsafe { libc::poll(&mut fd, 1, ms) };
        }
    }

    /// Takes one whole frame off `pending`, if there is one.
    fn frame(&mut self) -> Option<Vec<u8>> {
        let len = u64::from_le_bytes(self.pending.get(..8)?.try_into().ok()?);
        let len = usize::try_from(len).ok().filter(|&l| l <= MAX_REPLY);
        let Some(len) = len else {
            self.pending.clear();
            return Some(Vec::new());
        };
        if self.pending.len() < 8 + len {
            return None;
        }
        let body = self.pending[8..8 + len].to_vec();
        self.pending.drain(..8 + len);
        Some(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    /// A pipe from `sh -c script`, and the child to reap.
    fn pipe(script: &str) -> (ReplyPipe, std::process::Child) {
        let mut child = Command::new("sh")
            .args(["-c", script])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        (ReplyPipe::new(child.stdout.take().unwrap()).unwrap(), child)
    }

    #[test]
    fn frames_split_across_writes_and_sleeps_are_joined() {
        // The second frame arrives after the spin, in two writes.
        let (mut p, mut child) =
            pipe(r"printf '\003\0\0\0\0\0\0\0abc\002\0\0'; sleep 0.05; printf '\0\0\0\0\0de'");
        let second = Duration::from_secs(10);
        assert_eq!(p.next(second).ok(), Some(b"abc".to_vec()));
        assert_eq!(p.next(second).ok(), Some(b"de".to_vec()));
        assert!(matches!(p.next(second), Err(NoReply::Closed)));
        child.wait().unwrap();
    }

    #[test]
    fn a_silent_writer_times_out_and_an_impossible_length_is_empty() {
        let (mut p, mut child) = pipe("sleep 1");
        assert!(matches!(
            p.next(Duration::from_millis(20)),
            Err(NoReply::TimedOut)
        ));
        child.kill().unwrap();
        child.wait().unwrap();
        let (mut p, mut child) = pipe(r"printf '\377\377\377\377\377\377\377\377'; sleep 1");
        assert_eq!(p.next(Duration::from_secs(10)).ok(), Some(Vec::new()));
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
