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

use super::message::{Message, Reply};
use super::upstream::{Backoff, Pending, Upstream, UpstreamError, MAX_MESSAGE_BYTES};

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
    conn: RwLock<Option<Arc<Conn>>>,
}

fn line_of(message: &Message) -> Vec<u8> {
    let mut line = message.to_json_string().into_bytes();
    line.push(b'\n');
    line
}

impl StdioLink {
    pub fn new(command: Vec<String>) -> Self {
        Self {
            command,
            conn: RwLock::new(None),
        }
    }

    fn conn(&self, up: &Upstream) -> Result<Arc<Conn>, UpstreamError> {
        self.conn
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
            .ok_or_else(|| UpstreamError::Unavailable {
                upstream: up.name.clone(),
                detail: "the process is not running".into(),
            })
    }

    pub async fn request(
        &self,
        up: &Upstream,
        id: u64,
        message: &Message,
        timeout: Duration,
    ) -> Result<Reply, UpstreamError> {
        let conn = self.conn(up)?;
        let answer = conn.pending.insert(id);
        // However this ends (answered, timed out, cancelled), nobody waits any more.
        let _waiting = Waiting(&conn.pending, id);
        if conn.tx.send(line_of(message)).await.is_err() {
            return Err(UpstreamError::Unavailable {
                upstream: up.name.clone(),
                detail: "the process exited".into(),
            });
        }
        let no_answer = |detail: String| UpstreamError::NoAnswer {
            upstream: up.name.clone(),
            detail,
        };
        match tokio::time::timeout(timeout, answer).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(no_answer("the process exited before answering".into())),
            Err(_) => Err(no_answer(format!("no answer within {timeout:?}"))),
        }
    }

    pub async fn send(&self, up: &Upstream, message: &Message) -> Result<(), UpstreamError> {
        let conn = self.conn(up)?;
        conn.tx
            .send(line_of(message))
            .await
            .map_err(|_| UpstreamError::Unavailable {
                upstream: up.name.clone(),
                detail: "the process exited".into(),
            })
    }

    /// Runs the child, and runs it again with back-off whenever it ends.
    pub async fn supervise(up: Arc<Upstream>) {
        let Some(link) = up.stdio() else { return };
        let mut backoff = Backoff::new();
        loop {
            let started = Instant::now();
            match link.run_once(&up).await {
                Ok(status) => {
                    tracing::warn!(upstream = %up.name, %status, "upstream process ended")
                }
                Err(e) => {
                    tracing::error!(upstream = %up.name, command = ?link.command, error = %e, "cannot start the upstream process")
                }
            }
            let wait = backoff.after(started.elapsed());
            tracing::info!(upstream = %up.name, ?wait, "restarting the upstream after a pause");
            tokio::time::sleep(wait).await;
        }
    }

    /// One life of the child: spawn, initialize, serve until it ends.
    async fn run_once(&self, up: &Upstream) -> std::io::Result<std::process::ExitStatus> {
        let Some((program, args)) = self.command.split_first() else {
            return Err(std::io::Error::other("the command is empty"));
        };
        let mut child = Command::new(program)
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
        tracing::info!(upstream = %up.name, pid = child.id(), "upstream process started");

        let (tx, mut rx) = mpsc::channel::<Vec<u8>>(QUEUE);
        let writer = tokio::spawn(async move {
            while let Some(line) = rx.recv().await {
                if stdin.write_all(&line).await.is_err() || stdin.flush().await.is_err() {
                    break;
                }
            }
        });
        let name = up.name.clone();
        let stderr_logger = tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "dgw::upstream", upstream = %name, "{line}");
            }
        });
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
                    tracing::info!(upstream = %up.name, tools = up.tools().len(), "upstream ready");
                    true
                }
                Err(e) => {
                    tracing::error!(upstream = %up.name, error = %e, "upstream initialization failed");
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

/// Reads the child's stdout until it closes or sends something too large.
async fn read_messages(up: &Upstream, conn: &Conn, stdout: ChildStdout) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        let limit = MAX_MESSAGE_BYTES as u64 + 1;
        match (&mut reader).take(limit).read_until(b'\n', &mut buf).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(upstream = %up.name, error = %e, "reading the upstream failed");
                return;
            }
        }
        if buf.len() > MAX_MESSAGE_BYTES {
            tracing::error!(upstream = %up.name, "upstream sent a message over {MAX_MESSAGE_BYTES} bytes; restarting it");
            return;
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
                let shown = String::from_utf8_lossy(&line[..line.len().min(200)]).into_owned();
                tracing::warn!(upstream = %up.name, error = %e, line = %shown, "upstream wrote a line that is not JSON");
            }
        }
    }
}

/// A request waiting for its answer; dropped, it stops waiting.
struct Waiting<'a>(&'a Pending, u64);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.remove(self.1);
    }
}
