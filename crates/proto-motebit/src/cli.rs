//! `dgw motebit …`: verify Motebit artifacts and produce their
//! VerificationVerdicts offline; pin and unpin keys on a running gateway.

use clap::Subcommand;
use serde_json::{json, Value};

use dgw_protocol::command::admin::{self, AdminAuth};
use dgw_protocol::command::{print_json, read_file, CommandError, Exit};

use super::inspect;

#[derive(Debug, Subcommand)]
pub(crate) enum MotebitCommand {
    /// Verify a receipt (with its nested receipts), a delegation token or
    /// chain (a JSON array, root first) or a receipt sequence (an array of
    /// receipts): exit 0 verified, 1 not, 2 unreadable.
    Verify {
        /// The artifact JSON file; `-` reads standard input.
        file: String,
        /// `{motebit_id: public_key}`: keys used before embedded ones.
        #[arg(long = "known-keys")]
        known_keys: Option<String>,
    },
    /// Print the VerificationVerdict of a receipt or delegation token, or
    /// of a conformance-corpus case (`{kind, input}`): exit 0 when its
    /// integrity is verified, 1 when not, 2 when unreadable.
    Verdict {
        /// The artifact or case JSON file; `-` reads standard input.
        file: String,
    },
    /// Pin a key for a motebit_id on a running gateway (lifting a
    /// severance), as an administrator.
    Pin {
        #[command(flatten)]
        auth: AdminAuth,
        /// The gateway's JSON-RPC URL.
        #[arg(long, default_value = "http://127.0.0.1:8080/rpc")]
        gateway: String,
        /// The motebit_id.
        motebit_id: String,
        /// Its Ed25519 public key, 64 lowercase hex digits.
        public_key: String,
    },
    /// Forget the pin of a motebit_id on a running gateway (the next key
    /// seen is pinned), as an administrator.
    Unpin {
        #[command(flatten)]
        auth: AdminAuth,
        /// The gateway's JSON-RPC URL.
        #[arg(long, default_value = "http://127.0.0.1:8080/rpc")]
        gateway: String,
        /// The motebit_id.
        motebit_id: String,
    },
}

fn unreadable(f: motebit::Failure) -> CommandError {
    CommandError(f.to_string())
}

fn read_json(path: &str, what: &str) -> Result<Value, CommandError> {
    motebit::token::parse_value(&read_file(path, what)?).map_err(unreadable)
}

fn now_ms() -> f64 {
    (time::OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000) as f64
}

pub(crate) fn run(cmd: MotebitCommand) -> Result<Exit, CommandError> {
    match cmd {
        MotebitCommand::Verify { file, known_keys } => {
            let artifact = read_json(&file, "the artifact")?;
            let known = match known_keys {
                Some(path) => {
                    inspect::known_keys(&read_json(&path, "the known keys")?).map_err(unreadable)?
                }
                None => Default::default(),
            };
            let (ok, report) = inspect::verify(&artifact, &known, now_ms()).map_err(unreadable)?;
            print_json(&report);
            Ok(if ok { Exit::Success } else { Exit::Negative })
        }
        MotebitCommand::Verdict { file } => {
            let input = read_json(&file, "the artifact")?;
            let verdict = inspect::verdict(&input, now_ms(), &|_| None).map_err(unreadable)?;
            print_json(&verdict.to_json());
            Ok(
                if verdict.integrity == motebit::verdict::Integrity::Verified {
                    Exit::Success
                } else {
                    Exit::Negative
                },
            )
        }
        MotebitCommand::Pin {
            auth,
            gateway,
            motebit_id,
            public_key,
        } => admin::run(
            &auth,
            &gateway,
            "motebit/pin",
            json!({"motebit_id": motebit_id, "public_key": public_key}),
        ),
        MotebitCommand::Unpin {
            auth,
            gateway,
            motebit_id,
        } => admin::run(
            &auth,
            &gateway,
            "motebit/unpin",
            json!({"motebit_id": motebit_id}),
        ),
    }
}
