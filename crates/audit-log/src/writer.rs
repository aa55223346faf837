//! The writer: one thread that chains, writes, seals, rotates and prunes.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use delegateos::Keypair;
use dgw_core::state::AuditAnchor;
use dgw_core::trail::{Trail, TrailEntry};
use serde_json::{json, Value};

use crate::record::{self, Clock, Record, Seal, SealKind};
use crate::segments::{self, io};
use crate::start::{read_tail, Start};
use crate::AuditError;

/// Told of each seal as it is synced (the gateway anchors it in the state
/// store); runs on the writer's thread, so it must not block.
pub type OnSeal = Box<dyn Fn(&AuditAnchor) + Send>;

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
    /// Seal, sync and answer (a test waiting for the disk).
    Flush(SyncSender<()>),
    /// Seal with the shutdown seal, sync and answer with it.
    Close(SyncSender<Option<AuditAnchor>>),
}

/// The log's handle: a [`Trail`] for the core; dropping every handle seals
/// and syncs what was written, [`AuditLog::close`] with the shutdown seal.
pub struct AuditLog {
    queue: SyncSender<Message>,
    dropped: Arc<AtomicU64>,
}

impl AuditLog {
    /// Opens the log in `settings.dir` (created 0700), continuing its chain,
    /// and starts the writer; with no anchor to check it against.
    pub fn open(settings: Settings, key: Arc<Keypair>) -> Result<Self, AuditError> {
        Self::open_with(settings, key, &Start::default(), None)
    }

    /// Opens the log after checking its tail against `start.anchor`
    /// (refused: [`AuditError::Tampered`], nothing written). A line a
    /// crash cut short is cut off; what a gateway that did not stop cleanly
    /// left unsealed is sealed with a recovery seal after a `recovered`
    /// record. `on_seal` is told of every seal once it is synced.
    pub fn open_with(
        settings: Settings,
        key: Arc<Keypair>,
        start: &Start,
        on_seal: Option<OnSeal>,
    ) -> Result<Self, AuditError> {
        let writer = Writer::open(settings, key, start, on_seal)?;
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

    /// Seals what was written with the shutdown seal, syncs, and answers
    /// with it (`None`: the log is empty). Anything recorded afterwards
    /// (a request still running) is written and sealed with another
    /// shutdown seal at once, so the log at rest ends with one.
    pub fn close(&self) -> Option<AuditAnchor> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.queue.send(Message::Close(tx)).ok()?;
        rx.recv().ok().flatten()
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
    /// The last seal's record, which the next seal names.
    last_seal: Option<AuditAnchor>,
    last_kind: Option<SealKind>,
    /// After [`AuditLog::close`]: every batch gets a shutdown seal.
    closing: bool,
    on_seal: Option<OnSeal>,
    /// Each line is built here (one buffer for all of them).
    line: Vec<u8>,
    clock: Clock,
}

impl Writer {
    fn open(
        settings: Settings,
        key: Arc<Keypair>,
        start: &Start,
        on_seal: Option<OnSeal>,
    ) -> Result<Self, AuditError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&settings.dir)
            .map_err(io(&settings.dir))?;
        // Checked before anything is written.
        let tail = read_tail(&settings.dir, key.principal_id(), start)?;
        if tail.cut > 0 {
            cut_off(&tail.path, tail.cut)?;
        }
        if start.anchor.is_none() && tail.next_seq > 0 {
            tracing::warn!(dir = %settings.dir.display(), "audit log: the state store keeps no anchor for it; anchored from its next seal on");
        }
        let file = open_segment(&tail.path)?;
        let size = file.metadata().map_err(io(&tail.path))?.len();
        let file = BufWriter::with_capacity(1 << 16, file);
        let mut w = Self {
            settings,
            key,
            file,
            path: tail.path,
            size,
            opened: Instant::now(),
            next_seq: tail.next_seq,
            head: tail.head,
            unsealed_from: tail.unsealed_from,
            last_seal: tail.last_seal,
            last_kind: tail.last_kind,
            closing: false,
            on_seal,
            line: Vec::with_capacity(4096),
            clock: Clock::default(),
        };
        if let Some(after) = tail.new_log_after {
            tracing::warn!(after = %after, "audit log: a new log begins, chained to the anchor");
            w.append(&json!({"event": "new_log", "after": after}))?;
            w.seal(SealKind::Interval)?;
        } else if !tail.at_rest {
            let unsealed = w.next_seq - w.unsealed_from;
            tracing::warn!(bytes_cut = tail.cut, unsealed, path = %w.path.display(), "audit log: the gateway before did not stop cleanly; what it left is sealed with a recovery seal");
            w.append(&json!({"event": "recovered", "cutBytes": tail.cut, "unsealed": unsealed}))?;
            w.seal(SealKind::Recovery)?;
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
                    log_err(self.seal(self.kind()));
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
                        log_err(self.seal(self.kind()));
                        last_seal = Instant::now();
                        let _ = done.send(());
                    }
                    Message::Close(done) => {
                        self.closing = true;
                        log_err(self.seal(SealKind::Shutdown));
                        let _ = done.send(self.last_seal.clone());
                    }
                }
            }
            if self.closing || last_seal.elapsed() >= self.settings.seal_interval {
                log_err(self.seal(self.kind()));
                last_seal = Instant::now();
            }
            log_err(self.write_out());
            // Let entries gather: a writer that sleeps between batches is
            // not woken by every entry (a wake is a system call on the
            // caller's path).
            std::thread::sleep(LINGER);
        }
    }

    /// The kind of the next seal: after a close, shutdown.
    fn kind(&self) -> SealKind {
        if self.closing {
            SealKind::Shutdown
        } else {
            SealKind::Interval
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
        let at = self.clock.now();
        let hash = record::write_line(&mut self.line, self.next_seq, at, &self.head, write)?;
        self.file.write_all(&self.line).map_err(io(&self.path))?;
        self.size += self.line.len() as u64;
        self.next_seq += 1;
        self.head.clear();
        self.head.extend(hash.iter().map(|&b| char::from(b)));
        Ok(())
    }

    /// Signs the chain's head if it grew (a shutdown seal also when it
    /// did not, unless the log already ends with one), syncs, then rotates
    /// and prunes when due.
    fn seal(&mut self, kind: SealKind) -> Result<(), AuditError> {
        let grew = self.next_seq > self.unsealed_from;
        let at_rest = self.last_kind == Some(SealKind::Shutdown)
            && self.last_seal.as_ref().map(|s| s.seq + 1) == Some(self.next_seq);
        if self.next_seq == 0 || (!grew && (kind != SealKind::Shutdown || at_rest)) {
            return Ok(());
        }
        self.sign(kind)?;
        // A stopping gateway rotates at its next start.
        if kind != SealKind::Shutdown
            && (self.size >= self.settings.segment_bytes
                || self.opened.elapsed() >= self.settings.segment_age)
        {
            self.rotate(kind)?;
        }
        Ok(())
    }

    /// Appends the seal over what is unsealed, naming the seal before it;
    /// syncs; tells `on_seal`.
    fn sign(&mut self, kind: SealKind) -> Result<(), AuditError> {
        let seal = Seal::sign(
            &self.key,
            self.unsealed_from,
            self.next_seq - 1,
            &self.head,
            self.last_seal.as_ref(),
            kind,
        )?;
        self.append(&json!({"event": "seal", "seal": seal}))?;
        let anchor = AuditAnchor {
            seq: self.next_seq - 1,
            head: self.head.clone(),
        };
        self.unsealed_from = self.next_seq;
        self.last_kind = Some(kind);
        self.sync()?;
        if let Some(tell) = &self.on_seal {
            tell(&anchor);
        }
        self.last_seal = Some(anchor);
        Ok(())
    }

    /// Starts the next segment (the chain runs on) and applies retention.
    fn rotate(&mut self, kind: SealKind) -> Result<(), AuditError> {
        self.write_out()?;
        let path = self.settings.dir.join(segments::name(self.next_seq));
        self.file = BufWriter::with_capacity(1 << 16, open_segment(&path)?);
        self.path = path;
        self.size = 0;
        self.opened = Instant::now();
        self.prune(kind)
    }

    /// Removes the oldest segments while the log is over `max_bytes` or
    /// the oldest is over `max_age`, never the current one; records in the
    /// chain the head it pruned through, sealed with a seal of `kind`.
    fn prune(&mut self, kind: SealKind) -> Result<(), AuditError> {
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
            self.sign(kind)?;
        }
        Ok(())
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

/// Cuts `bytes` off the end of `path` (a line a crash left unfinished).
fn cut_off(path: &Path, bytes: u64) -> Result<(), AuditError> {
    let f = OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(io(path))?;
    let len = f.metadata().map_err(io(path))?.len();
    f.set_len(len.saturating_sub(bytes)).map_err(io(path))
}
