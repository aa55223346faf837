//! The budget journal: an append-only log of ledger records, made durable by
//! group commit (one `fdatasync` serves every record appended before it).
//!
//! File `journal-NNNNNNNN.log` holds frames: `len: u32 LE`, `crc: u32 LE`
//! (CRC-32 of the body, as `crc32fast` computes it), `body` (a version byte and
//! JSON), then zeros: the writer fills the space ahead of its frames with
//! zeros a megabyte at a time, so that a sync overwrites blocks the file
//! already has instead of growing it (growing makes every `fdatasync` commit
//! the file system's own journal too: a third slower here). A zero `len`
//! followed by nothing but zeros ends the data.
//!
//! The check catches torn and damaged writes, not tampering: the journal is
//! as trusted as the rest of `data_dir`. A damaged frame in the last file
//! with records is a write torn by a crash and is cut off; anywhere else it
//! is corruption and the journal refuses to open.

use std::fs::{self, File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::oneshot;

use super::{decode, encode_into};
use dgw_core::state::StorageError;

const HEADER: usize = 8;
/// How far ahead of its frames a file is filled with zeros.
const ZERO_AHEAD: u64 = 1 << 20;
/// Largest frame body accepted when reading.
const MAX_BODY: usize = 16 << 20;

fn check(body: &[u8]) -> [u8; 4] {
    crc32fast::hash(body).to_le_bytes()
}

fn file_name(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("journal-{number:08}.log"))
}

/// The number of a journal file from its name, if it is one.
fn file_number(name: &std::ffi::OsStr) -> Option<u64> {
    name.to_str()?
        .strip_prefix("journal-")?
        .strip_suffix(".log")?
        .parse()
        .ok()
}

type Waiter = oneshot::Sender<Result<(), StorageError>>;

/// What a journal file holds: the bodies of its intact frames, and where
/// the first damaged one starts, if one is.
struct Scan<'a> {
    bodies: Vec<&'a [u8]>,
    damaged_at: Option<usize>,
}

fn scan(bytes: &[u8]) -> Scan<'_> {
    let mut bodies = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at..].iter().all(|&b| b == 0) {
            // The zero-filled space ahead of the frames.
            break;
        }
        let frame = bytes.get(at..at + HEADER).and_then(|h| {
            let len = u32::from_le_bytes(h[..4].try_into().ok()?) as usize;
            let body = bytes.get(at + HEADER..at + HEADER + len)?;
            (len > 0 && len <= MAX_BODY && h[4..8] == check(body)).then_some(body)
        });
        let Some(body) = frame else {
            return Scan {
                bodies,
                damaged_at: Some(at),
            };
        };
        bodies.push(body);
        at += HEADER + body.len();
    }
    Scan {
        bodies,
        damaged_at: None,
    }
}

/// The file the flush thread writes to.
struct Current {
    number: u64,
    file: File,
    /// Where the next frame goes.
    end: u64,
    /// How far the file is filled (frames, then zeros).
    filled: u64,
}

impl Current {
    fn open(dir: &Path, number: u64) -> std::io::Result<Self> {
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(false)
            .open(file_name(dir, number))?;
        let len = file.metadata()?.len();
        Ok(Self {
            number,
            file,
            end: len,
            filled: len,
        })
    }

    /// Writes frames after the last, zero-filling ahead when they would
    /// reach past the filled space.
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        use std::os::unix::fs::FileExt;
        static ZEROS: [u8; 64 << 10] = [0; 64 << 10];
        let end = self.end + bytes.len() as u64;
        if end > self.filled {
            let target = end + ZERO_AHEAD;
            while self.filled < target {
                let n = (target - self.filled).min(ZEROS.len() as u64) as usize;
                self.file.write_all_at(&ZEROS[..n], self.filled)?;
                self.filled += n as u64;
            }
        }
        self.file.write_all_at(bytes, self.end)?;
        self.end = end;
        Ok(())
    }
}

/// Bytes waiting to be written, in order, each segment to its file.
struct Pending {
    segments: Vec<(u64, Vec<u8>)>,
    /// Records in `segments`.
    records: u64,
    waiters: Vec<Waiter>,
    closed: bool,
    /// Set when a write failed: the records in it are lost, so no later
    /// record may be written after the gap, or count as durable.
    failed: Option<StorageError>,
    /// Makes the next write fail, as a full or failing disk would.
    #[cfg(test)]
    fail_next_write: bool,
}

impl Pending {
    /// Stops the journal for good: what is not written is dropped, its
    /// waiters and every later append get `e`.
    fn fail(&mut self, e: StorageError) {
        for w in self.waiters.drain(..) {
            let _ = w.send(Err(e.clone()));
        }
        for (_, bytes) in &mut self.segments {
            bytes.clear();
        }
        self.records = 0;
        self.failed = Some(e);
    }

    fn has_bytes(&self) -> bool {
        self.segments.iter().any(|(_, b)| !b.is_empty())
    }
}

/// The longest a lazy record waits for a sync to share.
pub const LAZY_DELAY: std::time::Duration = std::time::Duration::from_millis(10);

/// The journal. Appends are ordered by the caller (the ledger appends under
/// its own lock); durability comes from [`Journal::append`]'s receiver.
pub struct Journal {
    dir: PathBuf,
    shared: Arc<(Mutex<Pending>, Condvar)>,
    /// Records appended by this process that are on disk: always a prefix,
    /// since records are written in the order they were appended.
    durable: Arc<AtomicU64>,
    flusher: Option<std::thread::JoinHandle<()>>,
}

/// Every readable record in the journal, oldest first, and the number of the
/// file new records go to.
pub struct Recovered<T> {
    pub records: Vec<T>,
    /// The file new records go to (the tests read it).
    #[cfg_attr(not(test), allow(dead_code))]
    pub current_file: u64,
}

fn io(e: std::io::Error) -> StorageError {
    StorageError::Backend(format!("journal: {e}"))
}

impl Journal {
    /// Opens the journal in `dir`, reading every record, and starts its
    /// flush thread.
    pub fn open<T: DeserializeOwned>(dir: &Path) -> Result<(Self, Recovered<T>), StorageError> {
        fs::create_dir_all(dir).map_err(io)?;
        let mut numbers: Vec<u64> = fs::read_dir(dir)
            .map_err(io)?
            .filter_map(|e| e.ok())
            .filter_map(|e| file_number(&e.file_name()))
            .collect();
        numbers.sort_unstable();
        let mut files = Vec::new();
        for &n in &numbers {
            let mut bytes = Vec::new();
            File::open(file_name(dir, n))
                .and_then(|mut f| f.read_to_end(&mut bytes))
                .map_err(io)?;
            files.push((n, bytes));
        }
        let scans: Vec<Scan> = files.iter().map(|(_, bytes)| scan(bytes)).collect();
        let mut records = Vec::new();
        for (i, ((n, _), scanned)) in files.iter().zip(&scans).enumerate() {
            let path = file_name(dir, *n);
            for body in &scanned.bodies {
                records.push(decode("journal", path.to_string_lossy().as_bytes(), body)?);
            }
            let Some(at) = scanned.damaged_at else {
                continue;
            };
            // Torn by a crash only if nothing was written after it;
            // otherwise refuse, and change nothing.
            if scans[i + 1..].iter().any(|s| !s.bodies.is_empty()) {
                return Err(StorageError::Corrupt {
                    tree: "journal",
                    key: path.display().to_string(),
                    problem: format!(
                        "a damaged record at offset {at} is followed by later records"
                    ),
                });
            }
            tracing::warn!(file = %path.display(), offset = at, "cutting off a torn journal record");
            OpenOptions::new()
                .write(true)
                .open(&path)
                .and_then(|f| f.set_len(at as u64).and_then(|()| f.sync_all()))
                .map_err(io)?;
        }
        let current_file = numbers.last().copied().unwrap_or(0) + 1;
        let shared = Arc::new((
            Mutex::new(Pending {
                segments: vec![(current_file, Vec::new())],
                records: 0,
                waiters: Vec::new(),
                closed: false,
                failed: None,
                #[cfg(test)]
                fail_next_write: false,
            }),
            Condvar::new(),
        ));
        let flusher = shared.clone();
        let durable = Arc::new(AtomicU64::new(0));
        let flushed = durable.clone();
        let flush_dir = dir.to_owned();
        let flusher = std::thread::Builder::new()
            .name("dgw-journal".into())
            .spawn(move || flush_loop(&flush_dir, &flusher, &flushed))
            .map_err(io)?;
        Ok((
            Self {
                dir: dir.to_owned(),
                shared,
                durable,
                flusher: Some(flusher),
            },
            Recovered {
                records,
                current_file,
            },
        ))
    }

    /// Appends a record; the receiver resolves once it is on disk, or with
    /// the error of a write that failed (after which every append fails:
    /// the journal would have a gap).
    pub fn append<T: Serialize>(&self, record: &T) -> oneshot::Receiver<Result<(), StorageError>> {
        let (tx, rx) = oneshot::channel();
        self.push(record, Some(tx));
        rx
    }

    /// Appends a record that may wait up to [`LAZY_DELAY`] to share the next
    /// sync, for records whose loss in a crash is harmless (the ledger
    /// redoes them). Written at the latest when the journal closes.
    pub fn append_lazy<T: Serialize>(&self, record: &T) {
        self.push(record, None);
    }

    fn push<T: Serialize>(&self, record: &T, waiter: Option<Waiter>) {
        thread_local! {
            /// Each record is encoded here before it is framed (no
            /// allocation per record).
            static BODY: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
        }
        BODY.with(|body| {
            let mut body = body.borrow_mut();
            body.clear();
            encode_into(&mut body, record);
            self.push_body(&body, waiter);
        });
    }

    fn push_body(&self, body: &[u8], waiter: Option<Waiter>) {
        let (lock, wake) = &*self.shared;
        let mut p = lock.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = &p.failed {
            if let Some(w) = waiter {
                let _ = w.send(Err(e.clone()));
            }
            return;
        }
        p.records += 1;
        // The flusher needs waking only when someone waits, or to start the
        // lazy delay; a wake per lazy record would cost a context switch each.
        let wake_flusher = waiter.is_some() || !p.has_bytes();
        let seg = &mut p
            .segments
            .last_mut()
            .expect("there is always a current segment")
            .1;
        seg.extend_from_slice(&(body.len() as u32).to_le_bytes());
        seg.extend_from_slice(&check(body));
        seg.extend_from_slice(body);
        p.waiters.extend(waiter);
        drop(p);
        if wake_flusher {
            wake.notify_one();
        }
    }

    /// Whether a write failed, so the journal refuses every record.
    pub fn failed(&self) -> bool {
        self.shared
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .failed
            .is_some()
    }

    /// How many of the records this process appended are on disk (the
    /// first that many, in order).
    pub fn durable_records(&self) -> u64 {
        self.durable.load(Ordering::Acquire)
    }

    /// Makes the next write fail.
    #[cfg(test)]
    pub fn fail_next_write(&self) {
        self.shared.0.lock().unwrap().fail_next_write = true;
    }

    /// Simulates a crash: what is not on disk yet never gets there, nor
    /// anything appended later.
    #[cfg(test)]
    pub fn abandon(&self) {
        self.shared
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .fail(StorageError::Closed);
    }

    /// Starts a new file: records appended from now on go to it. Returns its
    /// number; files before it may be deleted once a snapshot covering their
    /// records is durable.
    pub fn rotate(&self) -> u64 {
        let (lock, _) = &*self.shared;
        let mut p = lock.lock().unwrap_or_else(|e| e.into_inner());
        let next = p.segments.last().expect("a current segment").0 + 1;
        p.segments.push((next, Vec::new()));
        next
    }

    /// Deletes the files numbered below `first_kept`.
    pub fn remove_before(&self, first_kept: u64) -> Result<(), StorageError> {
        for entry in fs::read_dir(&self.dir).map_err(io)?.filter_map(|e| e.ok()) {
            if file_number(&entry.file_name()).is_some_and(|n| n < first_kept) {
                fs::remove_file(entry.path()).map_err(io)?;
            }
        }
        Ok(())
    }
}

impl Drop for Journal {
    /// Writes out everything appended, then stops the flush thread.
    fn drop(&mut self) {
        let (lock, wake) = &*self.shared;
        lock.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
        wake.notify_one();
        if let Some(t) = self.flusher.take() {
            let _ = t.join();
        }
    }
}

fn flush_loop(dir: &Path, shared: &(Mutex<Pending>, Condvar), durable: &AtomicU64) {
    let (lock, wake) = shared;
    let mut open: Option<Current> = None;
    loop {
        let (segments, records, waiters) = {
            let mut p = lock.lock().unwrap_or_else(|e| e.into_inner());
            // Sync when someone waits, or when lazy records have waited
            // LAZY_DELAY for company (counted from when the first was
            // seen, so a steady stream of them cannot postpone it), or at close.
            let mut lazy_since: Option<Instant> = None;
            while p.waiters.is_empty() && !p.closed {
                if p.has_bytes() {
                    let since = *lazy_since.get_or_insert_with(Instant::now);
                    let left = LAZY_DELAY.saturating_sub(since.elapsed());
                    if left.is_zero() {
                        break;
                    }
                    p = wake
                        .wait_timeout(p, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                } else {
                    p = wake.wait(p).unwrap_or_else(|e| e.into_inner());
                }
            }
            if p.closed && p.waiters.is_empty() && !p.has_bytes() {
                return;
            }
            let current = p.segments.last().expect("a current segment").0;
            let segments = std::mem::replace(&mut p.segments, vec![(current, Vec::new())]);
            let records = std::mem::take(&mut p.records);
            (segments, records, std::mem::take(&mut p.waiters))
        };
        let started = Instant::now();
        #[cfg(test)]
        let inject = std::mem::take(
            &mut lock
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .fail_next_write,
        );
        let result = (|| -> std::io::Result<()> {
            #[cfg(test)]
            if inject {
                return Err(std::io::Error::other("injected write failure"));
            }
            for (number, bytes) in &segments {
                if open.as_ref().map(|c| c.number) != Some(*number) {
                    if let Some(c) = open.take() {
                        c.file.sync_data()?;
                    }
                    let c = Current::open(dir, *number)?;
                    // The new file's directory entry must be durable too.
                    File::open(dir)?.sync_all()?;
                    open = Some(c);
                }
                open.as_mut().expect("opened above").write(bytes)?;
            }
            if let Some(c) = &open {
                c.file.sync_data()?;
            }
            Ok(())
        })()
        .map_err(io);
        crate::telemetry::record_journal_sync(started.elapsed(), waiters.len());
        match &result {
            Ok(()) => {
                durable.fetch_add(records, Ordering::Release);
            }
            Err(e) => {
                tracing::error!(error = %e, "journal write failed; refusing every later record until restart");
                lock.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .fail(e.clone());
            }
        }
        for w in waiters {
            let _ = w.send(result.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open(dir: &Path) -> Result<(Journal, Recovered<u64>), StorageError> {
        Journal::open::<u64>(dir)
    }

    fn runtime() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
    }

    /// A journal of two files: record 1 in the first, 2 in the second.
    fn two_files(dir: &Path) -> (u64, u64) {
        let rt = runtime();
        let (j, r) = open(dir).unwrap();
        rt.block_on(j.append(&1u64)).unwrap().unwrap();
        let second = j.rotate();
        rt.block_on(j.append(&2u64)).unwrap().unwrap();
        (r.current_file, second)
    }

    #[test]
    fn records_survive_and_torn_tails_are_cut() {
        let rt = runtime();
        let dir = tempfile::tempdir().unwrap();
        {
            let (j, r) = open(dir.path()).unwrap();
            assert!(r.records.is_empty());
            for n in 1..=3u64 {
                rt.block_on(j.append(&n)).unwrap().unwrap();
            }
        }
        let (j, r) = open(dir.path()).unwrap();
        assert_eq!(r.records, vec![1, 2, 3]);
        rt.block_on(j.append(&4u64)).unwrap().unwrap();
        drop(j);
        // The file is zero-filled ahead of its one frame (8 + 2 bytes).
        let last = file_name(dir.path(), r.current_file);
        let mut bytes = fs::read(&last).unwrap();
        assert_eq!(bytes.len() as u64, 10 + ZERO_AHEAD);
        assert!(bytes[10..].iter().all(|&b| b == 0));
        // A crash in the middle of a frame: its tail is cut off, the rest is kept.
        bytes[10..16].copy_from_slice(&[9, 0, 0, 0, 1, 2]);
        fs::write(&last, &bytes).unwrap();
        let (_, r) = open(dir.path()).unwrap();
        assert_eq!(r.records, vec![1, 2, 3, 4]);
        assert_eq!(fs::read(&last).unwrap().len(), 10);
    }

    #[test]
    fn lazy_records_ride_the_next_sync_or_are_written_soon_or_at_close() {
        let rt = runtime();
        let dir = tempfile::tempdir().unwrap();
        let on_disk = |dir: &Path| -> usize {
            fs::read_dir(dir)
                .unwrap()
                .filter_map(|e| e.ok())
                .map(|e| fs::metadata(e.path()).unwrap().len() as usize)
                .sum()
        };
        {
            let (j, _) = open(dir.path()).unwrap();
            // Alone, a lazy record reaches the disk within LAZY_DELAY (or so).
            j.append_lazy(&1u64);
            let deadline = Instant::now() + LAZY_DELAY * 100;
            while on_disk(dir.path()) == 0 {
                assert!(Instant::now() < deadline, "a lazy record was never written");
                std::thread::sleep(LAZY_DELAY / 2);
            }
            // With company, it is written by the next sync.
            j.append_lazy(&2u64);
            rt.block_on(j.append(&3u64)).unwrap().unwrap();
            // And at close, whatever is left.
            j.append_lazy(&4u64);
        }
        let (_, r) = open(dir.path()).unwrap();
        assert_eq!(r.records, vec![1, 2, 3, 4]);
    }

    /// A steady stream of lazy records, each sooner than LAZY_DELAY after
    /// the last, still reaches the disk about LAZY_DELAY after the first.
    #[test]
    fn a_stream_of_lazy_records_cannot_postpone_their_write() {
        let dir = tempfile::tempdir().unwrap();
        let (j, r) = open(dir.path()).unwrap();
        let file = file_name(dir.path(), r.current_file);
        let started = Instant::now();
        let mut n = 0u64;
        while fs::metadata(&file).map_or(0, |m| m.len()) == 0 {
            assert!(
                started.elapsed() < LAZY_DELAY * 200,
                "{n} lazy records, none written"
            );
            j.append_lazy(&n);
            n += 1;
            std::thread::sleep(LAZY_DELAY / 10);
        }
    }

    /// After a failed write nothing more is written or counted durable:
    /// records after a gap would be read as if the lost ones never existed.
    #[test]
    fn after_a_failed_write_every_append_fails() {
        let rt = runtime();
        let dir = tempfile::tempdir().unwrap();
        {
            let (j, _) = open(dir.path()).unwrap();
            rt.block_on(j.append(&1u64)).unwrap().unwrap();
            assert_eq!(j.durable_records(), 1);
            j.fail_next_write();
            assert!(rt.block_on(j.append(&2u64)).unwrap().is_err());
            j.append_lazy(&3u64);
            assert!(rt.block_on(j.append(&4u64)).unwrap().is_err());
            assert_eq!(j.durable_records(), 1);
        }
        let (_, r) = open(dir.path()).unwrap();
        assert_eq!(r.records, vec![1]);
    }

    /// Bytes after the zeros that end a file's frames are damage, not space.
    #[test]
    fn bytes_after_the_zero_fill_are_damage() {
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = two_files(dir.path());
        let path = file_name(dir.path(), first);
        let mut bytes = fs::read(&path).unwrap();
        bytes[1000] = 7;
        fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            open(dir.path()),
            Err(StorageError::Corrupt { .. })
        ));
        // In the last file with records, the same is a torn tail: cut off.
        fs::remove_file(file_name(dir.path(), second)).unwrap();
        let (_, r) = open(dir.path()).unwrap();
        assert_eq!(r.records, vec![1]);
        assert_eq!(fs::read(&path).unwrap().len(), 10);
        // Frames without zeros after them (as journals before the zero fill
        // were written) read the same.
        let (_, r) = open(dir.path()).unwrap();
        assert_eq!(r.records, vec![1]);
    }

    #[test]
    fn damage_before_later_records_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (first, _) = two_files(dir.path());
        let path = file_name(dir.path(), first);
        let mut bytes = fs::read(&path).unwrap();
        // The last byte of the frame's body.
        bytes[9] ^= 0xff;
        fs::write(&path, &bytes).unwrap();
        assert!(matches!(
            open(dir.path()),
            Err(StorageError::Corrupt { .. })
        ));
        assert_eq!(fs::read(&path).unwrap(), bytes, "refusing changes nothing");
    }
}
