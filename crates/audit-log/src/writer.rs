//! The writer: one thread that chains, writes, seals, rotates and prunes.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use delegateos::Keypair;
use dgw_core::trail::{Trail, TrailEntry};
use serde_json::{json, Value};

use crate::record::{self, now_text, Record, Seal, GENESIS};
use crate::segments::{self, io};
use crate::AuditError;

/// Entries waiting for the writer before new ones are counted as dropped.
const QUEUE: usize = 65_536;
/// The writer's pause between batches.
const LINGER: Duration = Duration::from_millis(2);

/// How the log is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub dir: PathBuf,
    /// How often the chain is sealed and synced (when it grew).
    pub seal_interval: Duration,
    /// A segment is closed once it is this large …
    pub segment_bytes: u64,
    /// … or this old.
    pub segment_age: Duration,
    /// Retention: whole old segments are removed while the log is larger …
    pub max_bytes: u64,
    /// … or while the oldest is older than this.
    pub max_age: Duration,
}

enum Message {
    Entry(TrailEntry),
    /// Seal, sync and answer (closing, or a test waiting for the disk).
    Flush(SyncSender<()>),
}

/// The log's handle: a [`Trail`] for the core; dropping every handle (or
/// [`AuditLog::close`]) seals and syncs what was written.
pub struct AuditLog {
    queue: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
}

impl AuditLog {
    /// Opens the log in `settings.dir` (created 0700), continuing its chain
    /// (a line a crash cut short is cut off and the cut recorded), and
    /// starts the writer.
    pub fn open(settings: Settings, key: Arc<Keypair>) -> Result<Self, AuditError> {
        let writer = Writer::open(settings, key)?;
        let (queue, rx) = std::sync::mpsc::sync_channel(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let counted = dropped.clone();
        // It ends when every handle is gone, after a last seal.
        std::thread::Builder::new()
            .name("dgw-audit".into())
            .spawn(move || writer.run(rx, counted))
            .map_err(|source| AuditError::Io {
                path: PathBuf::from("audit writer thread"),
                source,
            })?;
        Ok(Self { queue, dropped })
    }

    /// Waits until everything recorded before is written, sealed and synced.
    pub fn flush(&self) {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        if self.queue.send(Message::Flush(tx)).is_ok() {
            let _ = rx.recv();
        }
    }
}

impl Trail for AuditLog {
    fn record(&self, entry: TrailEntry) {
        match self.queue.try_send(Message::Entry(entry)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => {
                self.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }
}

struct Writer {
    settings: Settings,
    key: Arc<Keypair>,
    /// Written out at the end of each batch, and before every sync.
    file: BufWriter<File>,
    path: PathBuf,
    /// Bytes in the current segment.
    size: u64,
    opened: Instant,
    next_seq: u64,
    head: String,
    /// The first record not yet covered by a seal.
    unsealed_from: u64,
}

impl Writer {
    fn open(settings: Settings, key: Arc<Keypair>) -> Result<Self, AuditError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&settings.dir)
            .map_err(io(&settings.dir))?;
        let existing = segments::list(&settings.dir)?;
        let (path, next_seq, head, cut) = match existing.last() {
            None => (
                settings.dir.join(segments::name(0)),
                0,
                GENESIS.to_owned(),
                0,
            ),
            Some((first, path)) => {
                let (last, cut) = last_record(path)?;
                match last {
                    Some(r) => (path.clone(), r.seq + 1, r.hash, cut),
                    // An empty last segment continues the one before it.
                    None => {
                        let head = match existing.iter().rev().nth(1) {
                            Some((_, before)) => last_record(before)?.0.map(|r| r.hash),
                            None => None,
                        };
                        (
                            path.clone(),
                            *first,
                            head.unwrap_or_else(|| GENESIS.to_owned()),
                            cut,
                        )
                    }
                }
            }
        };
        let file = open_segment(&path)?;
        let size = file.metadata().map_err(io(&path))?.len();
        let file = BufWriter::with_capacity(1 << 16, file);
        let mut w = Self {
            settings,
            key,
            file,
            path,
            size,
            opened: Instant::now(),
            next_seq,
            head,
            unsealed_from: next_seq,
        };
        if cut > 0 {
            tracing::warn!(bytes = cut, path = %w.path.display(), "audit log: an unfinished last line was cut off");
            w.append(&json!({"event": "recovered", "cutBytes": cut}))?;
        }
        Ok(w)
    }

    fn run(mut self, rx: Receiver<Message>, dropped: Arc<AtomicU64>) {
        let mut last_seal = Instant::now();
        loop {
            let wait = self
                .settings
                .seal_interval
                .saturating_sub(last_seal.elapsed());
            let mut batch = match rx.recv_timeout(wait) {
                Ok(m) => vec![m],
                Err(RecvTimeoutError::Timeout) => Vec::new(),
                Err(RecvTimeoutError::Disconnected) => {
                    log_err(self.seal());
                    return;
                }
            };
            // Whatever else is queued, in one go.
            while batch.len() < 4096 {
                match rx.try_recv() {
                    Ok(m) => batch.push(m),
                    Err(_) => break,
                }
            }
            let lost = dropped.swap(0, Ordering::Relaxed);
            if lost > 0 {
                log_err(self.append(&json!({"event": "dropped", "entries": lost})));
            }
            for message in batch {
                match message {
                    Message::Entry(entry) => log_err(self.append_with(|out| entry.write_json(out))),
                    Message::Flush(done) => {
                        log_err(self.seal());
                        last_seal = Instant::now();
                        let _ = done.send(());
                    }
                }
            }
            if last_seal.elapsed() >= self.settings.seal_interval {
                log_err(self.seal());
                last_seal = Instant::now();
            }
            log_err(self.write_out());
            // Let entries gather: a writer that sleeps between batches is
            // not woken by every entry (a wake is a system call on the
            // caller's path).
            std::thread::sleep(LINGER);
        }
    }

    /// Chains `event` and writes it.
    fn append(&mut self, event: &Value) -> Result<(), AuditError> {
        self.append_with(|out| serde_json::to_writer(out, event))
    }

    /// Chains the event `write` writes and writes it.
    fn append_with(
        &mut self,
        write: impl FnOnce(&mut Vec<u8>) -> serde_json::Result<()>,
    ) -> Result<(), AuditError> {
        let (line, hash) = record::line(self.next_seq, &now_text(), &self.head, write)?;
        self.file.write_all(&line).map_err(io(&self.path))?;
        self.size += line.len() as u64;
        self.next_seq += 1;
        self.head = hash;
        Ok(())
    }

    /// Signs the chain's head if it grew, syncs, then rotates and prunes
    /// when due.
    fn seal(&mut self) -> Result<(), AuditError> {
        if self.next_seq == self.unsealed_from {
            return Ok(());
        }
        let seal = Seal::sign(&self.key, self.unsealed_from, self.next_seq - 1, &self.head)?;
        self.append(&json!({"event": "seal", "seal": seal}))?;
        self.unsealed_from = self.next_seq;
        self.sync()?;
        if self.size >= self.settings.segment_bytes
            || self.opened.elapsed() >= self.settings.segment_age
        {
            self.rotate()?;
        }
        Ok(())
    }

    /// Starts the next segment (the chain runs on) and applies retention.
    fn rotate(&mut self) -> Result<(), AuditError> {
        self.write_out()?;
        let path = self.settings.dir.join(segments::name(self.next_seq));
        self.file = BufWriter::with_capacity(1 << 16, open_segment(&path)?);
        self.path = path;
        self.size = 0;
        self.opened = Instant::now();
        self.prune()
    }

    /// Removes the oldest segments while the log is over `max_bytes` or
    /// the oldest is over `max_age`, never the current one; records in the
    /// chain the head it pruned through.
    fn prune(&mut self) -> Result<(), AuditError> {
        let all = segments::list(&self.settings.dir)?;
        let mut sizes: Vec<(u64, PathBuf, u64, Option<SystemTime>)> = Vec::new();
        for (seq, path) in all {
            let meta = std::fs::metadata(&path).map_err(io(&path))?;
            sizes.push((seq, path, meta.len(), meta.modified().ok()));
        }
        let mut total: u64 = sizes.iter().map(|s| s.2).sum();
        let mut pruned_through = None;
        while sizes.len() > 1 {
            let (_, path, size, modified) = &sizes[0];
            let old = modified
                .and_then(|m| m.elapsed().ok())
                .is_some_and(|age| age > self.settings.max_age);
            if total <= self.settings.max_bytes && !old {
                break;
            }
            // The next segment's first record names the head removed.
            let next = &sizes[1];
            let anchor = first_record(&next.1)?;
            std::fs::remove_file(path).map_err(io(path))?;
            tracing::info!(path = %path.display(), "audit log: removed by retention");
            total -= size;
            if let Some(r) = anchor {
                pruned_through = Some((r.seq.saturating_sub(1), r.prev));
            }
            sizes.remove(0);
        }
        if let Some((through, head)) = pruned_through {
            self.append(&json!({"event": "pruned", "through": through, "head": head}))?;
            self.seal_without_rotating()?;
        }
        Ok(())
    }

    fn seal_without_rotating(&mut self) -> Result<(), AuditError> {
        let seal = Seal::sign(&self.key, self.unsealed_from, self.next_seq - 1, &self.head)?;
        self.append(&json!({"event": "seal", "seal": seal}))?;
        self.unsealed_from = self.next_seq;
        self.sync()
    }

    /// Writes out what is buffered.
    fn write_out(&mut self) -> Result<(), AuditError> {
        self.file.flush().map_err(io(&self.path))
    }

    /// Writes out and syncs the segment.
    fn sync(&mut self) -> Result<(), AuditError> {
        self.write_out()?;
        self.file.get_ref().sync_data().map_err(io(&self.path))
    }
}

impl Drop for AuditLog {
    fn drop(&mut self) {
        self.flush();
    }
}

fn log_err(result: Result<(), AuditError>) {
    if let Err(e) = result {
        tracing::error!(error = %e, "audit log: writing failed");
    }
}

fn open_segment(path: &Path) -> Result<File, AuditError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .open(path)
        .map_err(io(path))
}

/// The first record of a segment.
pub(crate) fn first_record(path: &Path) -> Result<Option<Record>, AuditError> {
    let file = File::open(path).map_err(io(path))?;
    let mut line = String::new();
    BufReader::new(file)
        .read_line(&mut line)
        .map_err(io(path))?;
    Ok(serde_json::from_str(line.trim_end()).ok())
}

/// The last whole record of a segment, after cutting off an unfinished
/// last line (a crash mid-write); with the number of bytes cut.
fn last_record(path: &Path) -> Result<(Option<Record>, u64), AuditError> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let cut = (bytes.len() - keep) as u64;
    if cut > 0 {
        let mut f = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(io(path))?;
        f.set_len(keep as u64).map_err(io(path))?;
        f.seek(SeekFrom::End(0)).map_err(io(path))?;
    }
    let last = bytes[..keep]
        .split(|&b| b == b'\n')
        .rfind(|l| !l.is_empty())
        .map(serde_json::from_slice::<Record>)
        .transpose()
        .map_err(|e| AuditError::Record(format!("{}: the last record: {e}", path.display())))?;
    Ok((last, cut))
}
