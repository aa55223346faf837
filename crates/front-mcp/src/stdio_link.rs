//! An upstream MCP server run as a child process, spoken to over stdio
//! with one JSON-RPC message per line (§11.3). The process is spawned at
//! start and restarted with back-off when it dies; its stderr goes to our
//! logs, one event per line.

use std::process::Stdio;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{ChildStdout, Command};
use tokio::sync::mpsc;

use super::link::{Backoff, Host, Pending, UpstreamError, MAX_MESSAGE_BYTES};
use super::message::{Message, Reply};
use super::secret::{Redactor, Secret};

/// What a child is given of dgw's own environment: enough for launchers
/// such as `npx` and `uvx` to find their programs and caches, nothing else.
pub const SAFE_BASE_ENV: [&str; 4] = ["PATH", "HOME", "LANG", "TMPDIR"];

/// Lines queued for the child's stdin.
const QUEUE: usize = 1024;

/// A running child: its stdin queue and the requests waiting on it.
struct Conn {
    tx: mpsc::Sender<Vec<u8>>,
    pending: Pending,
}

/// The stdio transport of one upstream.
pub struct StdioLink {
    command: Vec<String>,
    /// Set in the child's environment on top of [`SAFE_BASE_ENV`].
    env: Vec<(String, Secret)>,
    cwd: Option<std::path::PathBuf>,
    /// Scrubs `env`'s secrets from the child's stderr before it is logged.
    redactor: Arc<Redactor>,
    conn: RwLock<Option<Arc<Conn>>>,
}

fn line_of(message: &Message) -> Vec<u8> {
    let mut line = message.to_json_string().into_bytes();
    line.push(b'\n');
    line
}

impl StdioLink {
    pub fn new(
        command: Vec<String>,
        env: Vec<(String, Secret)>,
        cwd: Option<std::path::PathBuf>,
    ) -> Self {
        Self {
            redactor: Arc::new(Redactor::new(env.iter().map(|(_, s)| s))),
            command,
            env,
            cwd,
            conn: RwLock::new(None),
        }
    }

    fn conn(&self, up: &dyn Host) -> Result<Arc<Conn>, UpstreamError> {
        self.conn
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| UpstreamError::Unavailable {
                upstream: up.name().to_owned(),
                detail: "the process is not running".into(),
            })
    }

    pub async fn request(
        &self,
        up: &dyn Host,
        id: u64,
        message: &Message,
        timeout: Duration,
    ) -> Result<Reply, UpstreamError> {
        // No 2026-07-28 toward a child process: the session's form.
        let message = &*super::upstream_era::session_form(message);
        let conn = self.conn(up)?;
        let answer = conn.pending.insert(id);
        // However this ends (answered, timed out, cancelled), nobody waits any more.
        let _waiting = Waiting(&conn.pending, id);
        if conn.tx.send(line_of(message)).await.is_err() {
            return Err(UpstreamError::Unavailable {
                upstream: up.name().to_owned(),
                detail: "the process exited".into(),
            });
        }
        let no_answer = |detail: String| UpstreamError::NoAnswer {
            upstream: up.name().to_owned(),
            detail,
        };
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(no_answer("the process exited before answering".into())),
            Err(_) => Err(no_answer(format!(
                "no answer within {}",
                dgw_core::units::show_duration(timeout)
            ))),
        }
    }

    pub async fn send(&self, up: &dyn Host, message: &Message) -> Result<(), UpstreamError> {
        let conn = self.conn(up)?;
        conn.tx
            .send(line_of(message))
            .await
            .map_err(|_| UpstreamError::Unavailable {
                upstream: up.name().to_owned(),
                detail: "the process exited".into(),
            })
    }

    /// Runs the child, and runs it again with back-off whenever it ends.
    pub async fn supervise(&self, up: &dyn Host) {
        let link = self;
        let mut backoff = Backoff::new();
        loop {
            let started = Instant::now();
            match link.run_once(up).await {
                Ok(status) => {
                    tracing::warn!(upstream = %up.name(), %status, "upstream process ended")
                }
                Err(e) => {
                    tracing::error!(upstream = %up.name(), command = %link.command.join(" "), error = %e, "cannot start the upstream process")
                }
            }
            let wait = backoff.after(started.elapsed());
            tracing::info!(upstream = %up.name(), wait = %dgw_core::units::show_duration(wait), "restarting the upstream after a pause");
            tokio::time::sleep(wait).await;
        }
    }

    /// One life of the child: spawn, initialize, serve until it ends.
    async fn run_once(&self, up: &dyn Host) -> std::io::Result<std::process::ExitStatus> {
        let Some((program, args)) = self.command.split_first() else {
            return Err(std::io::Error::other("the command is empty"));
        };
        let mut command = Command::new(program);
        // Never the rest of dgw's environment: it may hold other
        // upstreams' secrets (`value_env`).
        command.env_clear();
        for name in SAFE_BASE_ENV {
            if let Some(v) = std::env::var_os(name) {
                command.env(name, v);
            }
        }
        for (name, value) in &self.env {
            command.env(name, value.expose());
        }
        if let Some(cwd) = &self.cwd {
            command.current_dir(cwd);
        }
        let mut child = command
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let (Some(mut stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(std::io::Error::other("the child's stdio was not piped"));
        };
        tracing::info!(upstream = %up.name(), pid = child.id(), "upstream process started");

        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(QUEUE);
        let writer = tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });
        let stderr_logger = tokio::spawn(log_stderr(
            up.name().to_owned(),
            self.redactor.clone(),
            stderr,
        ));
        let conn = Arc::new(Conn {
            tx,
            pending: Pending::default(),
        });
        *self.conn.write().unwrap_or_else(|p| p.into_inner()) = Some(conn.clone());

        let reader = read_messages(up, &conn, stdout);
        tokio::pin!(reader);
        let initialized = tokio::select! {
            done = up.handshake() => match done {
                Ok(()) => {
                    up.set_ready(true);
                    tracing::info!(upstream = %up.name(), tools = up.tool_count(), "upstream ready");
                    true
                }
                Err(e) => {
                    tracing::error!(upstream = %up.name(), error = %e, "upstream initialization failed");
                    false
                }
            },
            () = &mut reader => false,
        };
        if initialized {
            (&mut reader).await;
        }

        up.set_ready(false);
        *self.conn.write().unwrap_or_else(|p| p.into_inner()) = None;
        conn.pending.fail_all();
        writer.abort();
        let _ = child.start_kill();
        let status = child.wait().await;
        let _ = tokio::time::timeout(Duration::from_secs(1), stderr_logger).await;
        status
    }
}

/// Most bytes of one stderr line logged; the rest is dropped and counted.
pub const MAX_STDERR_LINE: usize = 4096;

/// How much of an oversized message's start and end is kept to find its ID.
const ID_WINDOW: usize = 4096;

/// Logs the child's stderr a line at a time, each line cut to
/// [`MAX_STDERR_LINE`] bytes: a child that writes a gigabyte without a
/// newline costs a bounded buffer, not the gateway's memory.
async fn log_stderr(name: String, redactor: Arc<Redactor>, stderr: tokio::process::ChildStderr) {
    let mut reader = BufReader::new(stderr);
    let mut line = Vec::with_capacity(256);
    loop {
        line.clear();
        let read = (&mut reader)
            .take(MAX_STDERR_LINE as u64)
            .read_until(b'\n', &mut line)
            .await;
        match read {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let complete = line.last() == Some(&b'\n');
        let text = redactor.text(&String::from_utf8_lossy(line.trim_ascii_end()));
        if complete {
            tracing::info!(target: "dgw::upstream", upstream = %name, "{text}");
            continue;
        }
        let dropped = match skip_line(&mut reader, |_| {}).await {
            Ok(n) => n,
            Err(_) => return,
        };
        dgw_core::telemetry::record_stderr_dropped(&name, dropped);
        tracing::info!(target: "dgw::upstream", upstream = %name, dropped_bytes = dropped, "{text}…");
    }
}

/// Consumes the rest of a line (through its newline, or to the end of the
/// stream), handing each chunk to `seen`; returns how many bytes it skipped.
async fn skip_line<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    mut seen: impl FnMut(&[u8]),
) -> std::io::Result<u64> {
    let mut skipped = 0u64;
    loop {
        let chunk = reader.fill_buf().await?;
        if chunk.is_empty() {
            return Ok(skipped);
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                seen(&chunk[..i]);
                reader.consume(i + 1);
                return Ok(skipped + i as u64 + 1);
            }
            None => {
                let n = chunk.len();
                seen(chunk);
                reader.consume(n);
                skipped += n as u64;
            }
        }
    }
}

/// The first `"id":N` in `bytes` whose N is a request still waiting.
fn waiting_id_in(bytes: &[u8], pending: &Pending) -> Option<u64> {
    let mut rest = bytes;
    while let Some(at) = rest.windows(5).position(|w| w == b"\"id\":") {
        rest = &rest[at + 5..];
        let digits: Vec<u8> = rest
            .iter()
            .skip_while(|b| b.is_ascii_whitespace())
            .take_while(|b| b.is_ascii_digit())
            .copied()
            .collect();
        if let Some(id) = std::str::from_utf8(&digits)
            .ok()
            .and_then(|d| d.parse().ok())
        {
            if pending.contains(id) {
                return Some(id);
            }
        }
    }
    None
}

/// Reads the child's stdout until it closes. A message over
/// [`MAX_MESSAGE_BYTES`] is skipped to its end and fails only the call it
/// answers (`upstream_reply_too_large`), found by its ID near its start or
/// end; the child and every other session's calls go on.
async fn read_messages(up: &dyn Host, conn: &Conn, stdout: ChildStdout) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let limit = MAX_MESSAGE_BYTES as u64 + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut buf).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(upstream = %up.name(), error = %e, "reading the upstream failed");
                return;
            }
        }
        if buf.len() > MAX_MESSAGE_BYTES {
            let mut tail: std::collections::VecDeque<u8> =
                buf[buf.len() - ID_WINDOW..].iter().copied().collect();
            let skipped = skip_line(&mut reader, |chunk| {
                tail.extend(chunk.iter().rev().take(ID_WINDOW).rev());
                let excess = tail.len().saturating_sub(ID_WINDOW);
                tail.drain(..excess);
            })
            .await;
            let tail: Vec<u8> = tail.into_iter().collect();
            let id = waiting_id_in(&buf[..ID_WINDOW], &conn.pending)
                .or_else(|| waiting_id_in(&tail, &conn.pending));
            tracing::error!(upstream = %up.name(), id = %id.map_or_else(|| "none found".to_owned(), |i| i.to_string()), skipped_bytes = %skipped.as_ref().map_or_else(|e| format!("unknown ({e})"), u64::to_string), "upstream sent a message over {MAX_MESSAGE_BYTES} bytes; failing the call it answers");
            if let Some(id) = id {
                conn.pending
                    .answer(&serde_json::json!(id), too_large_reply());
            }
            if skipped.is_err() {
                return;
            }
            continue;
        }
        let line = buf.trim_ascii();
        if line.is_empty() {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(value) => {
                if let Some(reply) = up.on_message(&conn.pending, value) {
                    let _ = conn.tx.send(line_of(&reply)).await;
                }
            }
            Err(e) => {
                let shown = up.redact(&String::from_utf8_lossy(&line[..line.len().min(200)]));
                tracing::warn!(upstream = %up.name(), error = %e, line = %shown, "upstream wrote a line that is not JSON");
            }
        }
    }
}

/// The answer a call gets when its reply was too large to read.
pub fn too_large_reply() -> Reply {
    Reply::Error(serde_json::json!({
        "code": dgw_front_jsonrpc::INTERNAL_ERROR,
        "message": format!("the upstream's reply is over {MAX_MESSAGE_BYTES} bytes"),
        "data": {"type": "upstream_reply_too_large"},
    }))
}

/// A request waiting for its answer; dropped, it stops waiting.
struct Waiting<'a>(&'a Pending, u64);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.remove(self.1);
    }
}
